/**
 * The jobs the OpenAI images adapter is tested with, in one list: `OpenAiImages.test.ts` runs
 * each through the adapter against the fake, and `OpenAi.conformance.test.ts` replays the
 * very requests the adapter made through the official `openai` client, so the adapter, the
 * fake and the client are held to the same scenarios.
 */
import type { Task } from "@mediagate/core"
import * as Testing from "@mediagate/core/testing"
import { OpenAiImages, Png } from "@mediagate/upstream"
import type { FileHost } from "../../fakes/FakeOpenAi.js"

/** Small real files of each type the edits take (8x8), and one they do not (a GIF). */
export const files = {
  png: Png.encodePng({ width: 8, height: 8, seed: 1 }),
  wide: Png.encodePng({ width: 16, height: 8, seed: 2 }),
  jpeg: Buffer.from(
    "/9j/2wBDAAYEBQYFBAYGBQYHBwYIChAKCgkJChQODwwQFxQYGBcUFhYaHSUfGhsjHBYWICwgIyYnKSopGR8tMC0oMCUoKSj/2wBDAQcHBwoIChMKChMoGhYaKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCgoKCj/wAARCAAIAAgDASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAAAAX/xAAUEAEAAAAAAAAAAAAAAAAAAAAA/8QAFQEBAQAAAAAAAAAAAAAAAAAABgf/xAAUEQEAAAAAAAAAAAAAAAAAAAAA/9oADAMBAAIRAxEAPwCeADqK/9k=",
    "base64"
  ),
  webp: Buffer.from("UklGRjoAAABXRUJQVlA4IC4AAADQAQCdASoIAAgAAUAmJaACdLoB+AADsAD+4uC/8/M7txf1W/+rQ+Wh8tD+AAAA", "base64"),
  gif: Buffer.from("R0lGODlhBAAEAIAAAExpcQECAyH5BAUAAAAALAAAAAAEAAQAAAIEjI8ZBQA7", "base64")
}

/** Reference images as a host serves them, often with a type that says nothing (object storage). */
export const references = (host: FileHost) => {
  host.put("/ref.png", files.png, "application/octet-stream")
  host.put("/typed.png", files.png, "image/png")
  host.put("/ref.jpg", files.jpeg, "binary/octet-stream")
  host.put("/ref.webp", files.webp, "")
  host.put("/ref.gif", files.gif, "image/gif")
  host.put("/wide.png", files.wide, "image/png")
  host.put("/not-an-image.png", Buffer.from("<html>sign in first</html>"), "image/png")
}

export interface Scenario {
  readonly name: string
  /** The provider's model of the target. */
  readonly model: string
  readonly job: (host: string) => Task.UpstreamJob
  /** A template's input; the adapter's default input when absent. */
  readonly input?: (job: Task.UpstreamJob) => Record<string, unknown>
  /** What the task ends with: how many images, of what size, from how many calls, answered how. */
  readonly images: number
  readonly size: readonly [number, number]
  readonly sizeSent: string
  readonly calls: number
  readonly answer: "b64_json" | "url"
}

export const inputOf = (scenario: Scenario, job: Task.UpstreamJob) =>
  scenario.input?.(job) ?? OpenAiImages.defaultInput(job, scenario.model)

export const scenarios: ReadonlyArray<Scenario> = [
  {
    name: "gpt-image-1, 9:16, two images",
    model: "gpt-image-1",
    job: () => Testing.job({ n: 2, ratio: "9:16", width: 864, height: 1536 }),
    images: 2, size: [1024, 1536], sizeSent: "1024x1536", calls: 1, answer: "b64_json"
  },
  {
    name: "gpt-image-1-mini without a ratio: auto",
    model: "gpt-image-1-mini",
    job: () => Testing.job({ ratio: null, width: null, height: null }),
    images: 1, size: [1024, 1024], sizeSent: "auto", calls: 1, answer: "b64_json"
  },
  {
    name: "gpt-image-1.5, 16:9, twelve images in calls of at most ten",
    model: "gpt-image-1.5",
    job: () => Testing.job({ n: 12 }),
    images: 12, size: [1536, 1024], sizeSent: "1536x1024", calls: 2, answer: "b64_json"
  },
  {
    name: "dall-e-2, 16:9: square, the size nearest the job's",
    model: "dall-e-2",
    job: () => Testing.job({ n: 3 }),
    images: 3, size: [1024, 1024], sizeSent: "1024x1024", calls: 1, answer: "b64_json"
  },
  {
    name: "dall-e-2, a template asking for URLs at 512x512",
    model: "dall-e-2",
    job: () => Testing.job({ ratio: "1:1", width: 512, height: 512 }),
    input: (job) => ({ prompt: job.prompt, n: job.n, size: OpenAiImages.sizeOf(job, "dall-e-2"), response_format: "url" }),
    images: 1, size: [512, 512], sizeSent: "512x512", calls: 1, answer: "url"
  },
  {
    name: "dall-e-3, 16:9, three images: one call each",
    model: "dall-e-3",
    job: () => Testing.job({ n: 3 }),
    images: 3, size: [1792, 1024], sizeSent: "1792x1024", calls: 3, answer: "b64_json"
  },
  {
    name: "dall-e-3, 9:16, a template with quality and style, URLs",
    model: "dall-e-3",
    job: () => Testing.job({ ratio: "9:16", width: 864, height: 1536 }),
    input: (job) => ({ prompt: job.prompt, n: job.n, size: OpenAiImages.sizeOf(job, "dall-e-3"), quality: "hd", style: "natural" }),
    images: 1, size: [1024, 1792], sizeSent: "1024x1792", calls: 1, answer: "url"
  },
  {
    name: "gpt-image-1 edit: one PNG served as application/octet-stream",
    model: "gpt-image-1",
    job: (host) => Testing.job({ mode: "image-to-image", ratio: "1:1", width: 1024, height: 1024, imageUrls: [`${host}/ref.png`] }),
    images: 1, size: [1024, 1024], sizeSent: "1024x1024", calls: 1, answer: "b64_json"
  },
  {
    name: "gpt-image-1 edit: PNG, JPEG and WebP served with wrong types, two images",
    model: "gpt-image-1",
    job: (host) =>
      Testing.job({ mode: "image-to-image", n: 2, ratio: "3:2", width: 1536, height: 1024, imageUrls: [`${host}/ref.png`, `${host}/ref.jpg`, `${host}/ref.webp`] }),
    images: 2, size: [1536, 1024], sizeSent: "1536x1024", calls: 1, answer: "b64_json"
  },
  {
    name: "dall-e-2 edit: one square PNG",
    model: "dall-e-2",
    job: (host) => Testing.job({ mode: "image-to-image", ratio: "1:1", width: 1024, height: 1024, imageUrls: [`${host}/typed.png`] }),
    images: 1, size: [1024, 1024], sizeSent: "1024x1024", calls: 1, answer: "b64_json"
  }
]
