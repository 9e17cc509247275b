/**
 * The percent parser and the bounds every adapter's progress goes through: tqdm lines as
 * models print them give their percent; free text with a percent or a fraction never does.
 */
import { describe, expect, it } from "@effect/vitest"
import { Progress } from "@mediagate/upstream"
import { parseProgressFromLogs } from "replicate"

describe("Progress.percentOfLine", () => {
  it.each([
    [" 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]", 45],
    ["  0%|          | 0/28 [00:00<?, ?it/s]", 0],
    ["100%|██████████| 28/28 [00:06<00:00,  4.31it/s]", 100],
    ["Sampling:  36%|███▌      | 10/28 [00:02<00:04,  4.30it/s]", 36],
    ["100%|##########| 50/50 [00:11<00:00,  4.40it/s]", 100],
    ["  7%|▋         | 2/28 [00:00<00:05,  4.57it/s]", 7],
    // tqdm rounds: 2/3 is printed 67%.
    [" 67%|██████▋   | 2/3 [00:01<00:00,  1.9it/s]", 67]
  ])("%s gives %i", (line, percent) => {
    expect(Progress.percentOfLine(line)).toBe(percent)
  })

  it.each([
    "VRAM usage 45%",
    "step 9/20",
    "Loading checkpoint shards: 3/4",
    "45% | done",
    "100% of the prompt kept",
    "guidance_scale=7.5, steps=20/20",
    // A bar whose percent disagrees with its count, a percent over 100, a total of 0, more done than the total.
    " 90%|█████████ | 3/20 [00:01<00:05]",
    "145%|██████████| 29/20 [00:01<00:00]",
    "  0%|          | 0/0 [00:00<?, ?it/s]",
    " 50%|█████     | 30/20 [00:01<00:00]",
    // A download bar in scaled units has no whole n/total: not a count of steps.
    "Downloading: 100%|██████████| 1.20G/1.20G [00:10<00:00, 120MB/s]",
    ""
  ])("%j gives none", (line) => {
    expect(Progress.percentOfLine(line)).toBeUndefined()
  })

  it("agrees with Replicate's official client on the lines it reads", () => {
    const lines = [
      " 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]",
      "100%|██████████| 28/28 [00:06<00:00,  4.31it/s]",
      "76%|████████████████████████████         | 7568/10000 [00:33<00:10, 229.00it/s]",
      "VRAM usage 45%",
      "step 9/20"
    ]
    for (const line of lines) {
      const theirs = parseProgressFromLogs(line)
      expect(Progress.percentOfLine(line)).toBe(theirs === null ? undefined : Math.round(theirs.percentage * 100))
    }
  })
})

describe("Progress.fromLogs", () => {
  it("the last bar line wins; \\r redraws are lines", () => {
    const lines = Progress.linesOf("Using seed 42\n  0%|          | 0/20 [00:00<?, ?it/s]\r 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]\nsaving\n")
    expect(lines).toHaveLength(4)
    expect(Progress.fromLogs(undefined, lines)).toEqual({ percent: 45, logs: lines })
  })

  it("lines without a bar give logs and no percent; nothing gives no progress; a queue position alone is progress", () => {
    expect(Progress.fromLogs(undefined, ["Using seed 42", "VRAM 45%"])).toEqual({ logs: ["Using seed 42", "VRAM 45%"] })
    expect(Progress.fromLogs(undefined, [])).toBeUndefined()
    expect(Progress.fromLogs(3, [])).toEqual({ queuePosition: 3 })
    expect(Progress.of({})).toBeUndefined()
  })

  it("passes the last 20 lines, each at most 500 characters; the percent is read over every line", () => {
    const lines = [" 45%|████▌     | 9/20 [00:02<00:02,  4.12it/s]", ...Array.from({ length: 30 }, (_, i) => `line ${i} ${"x".repeat(i === 29 ? 900 : 0)}`)]
    const progress = Progress.fromLogs(undefined, lines)!
    expect(progress.percent).toBe(45)
    expect(progress.logs).toHaveLength(20)
    expect(progress.logs![0]).toBe("line 10 ")
    expect(progress.logs![19]).toHaveLength(500)
  })
})
