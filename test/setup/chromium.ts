/**
 * Vitest's global setup for the browser suites (test/docs-page.test.ts,
 * test/playground.test.ts): the Chromium of the npm package @sparticuz/chromium, a headless
 * shell that needs no system library beyond libc, libexpat and libgcc, is unpacked once
 * before any suite starts, and the suites get its path (test/browser.ts).
 *
 * The package ships it brotli-compressed (`bin/chromium.br`), with three Open Sans fonts
 * (`bin/fonts.tar.br`): the shell aborts on the first text it draws when fontconfig finds no
 * font at all, as on a machine with no fonts installed. Its own `executablePath()` unpacks
 * to `os.tmpdir()/chromium` and returns any file it finds there: one half written by an
 * interrupted run or by another clone's run at the same moment, another version's, or another
 * user's (it is mode 0700). So both are unpacked here instead, into a folder of their own that
 * is renamed into place, under the package's version in node_modules/.cache, once whole.
 * The first run takes 2 to 4 s; later runs find the folder.
 */
import { randomUUID } from "node:crypto"
import { createReadStream, createWriteStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"
import { pipeline } from "node:stream/promises"
import { createBrotliDecompress } from "node:zlib"
import type { TestProject } from "vitest/node"

const root = new URL("../..", import.meta.url).pathname

/** How the suites start the browser. */
export interface ChromiumFiles {
  /** The unpacked binary (an absolute path). */
  readonly executablePath: string
  /** The folder of the fontconfig file to give it as FONTCONFIG_PATH. */
  readonly fontconfigPath: string
}

declare module "vitest" {
  export interface ProvidedContext {
    readonly chromium: ChromiumFiles
  }
}

/**
 * The machine's fonts when it has any (so screenshots look as in the machine's own browsers),
 * and the package's Open Sans in any case.
 */
const fontsConf = (fonts: string) => `<?xml version="1.0"?>
<!DOCTYPE fontconfig SYSTEM "urn:fontconfig:fonts.dtd">
<fontconfig>
  <include ignore_missing="yes">/etc/fonts/fonts.conf</include>
  <dir>${fonts}</dir>
</fontconfig>
`

/** The unpacked folder of this version, unpacking it first when it is not there yet. */
const unpack = async (): Promise<ChromiumFiles> => {
  // The package exports only its entry (build/cjs/index.cjs); bin/ is two folders up.
  const pkg = join(dirname(createRequire(import.meta.url).resolve("@sparticuz/chromium")), "..", "..")
  const { version } = JSON.parse(readFileSync(join(pkg, "package.json"), "utf8")) as { version: string }
  const dir = join(root, "node_modules", ".cache", "mediagate", `chromium-${version}`)
  const files: ChromiumFiles = { executablePath: join(dir, "chromium"), fontconfigPath: dir }
  if (existsSync(dir)) return files
  const partial = `${dir}.${randomUUID()}.partial`
  mkdirSync(partial, { recursive: true })
  try {
    // tar-fs is the package's own dependency, the one it unpacks its fonts with.
    const tar = createRequire(join(pkg, "package.json"))("tar-fs") as {
      extract: (dir: string, options: { chown: boolean }) => NodeJS.WritableStream
    }
    await Promise.all([
      pipeline(createReadStream(join(pkg, "bin", "chromium.br")), createBrotliDecompress(), createWriteStream(join(partial, "chromium"), { mode: 0o755 })),
      // fonts/Open_Sans/*.ttf, and a fonts.conf for AWS Lambda that ours replaces.
      pipeline(createReadStream(join(pkg, "bin", "fonts.tar.br")), createBrotliDecompress(), tar.extract(partial, { chown: false }))
    ])
    writeFileSync(join(partial, "fonts.conf"), fontsConf(join(dir, "fonts")))
    renameSync(partial, dir)
  } catch (error) {
    // Another run that unpacked at the same moment renamed its folder first.
    if (!existsSync(dir)) throw error
  } finally {
    rmSync(partial, { recursive: true, force: true })
  }
  return files
}

export default async function setup(project: TestProject) {
  project.provide("chromium", await unpack())
}
