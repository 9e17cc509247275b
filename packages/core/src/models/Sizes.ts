/**
 * Pixel sizes for the models whose tables the spec does not give (documented in
 * docs/models.md): video frames by ratio and resolution, images by ratio and resolution.
 */

const even = (value: number) => Math.round(value / 2) * 2
const multipleOf8 = (value: number) => Math.round(value / 8) * 8

const parseRatio = (ratio: string): readonly [number, number] => {
  const [w, h] = ratio.split(":").map(Number)
  return [w!, h!]
}

/** Short side of a video frame per resolution. */
export const videoShortSide: Readonly<Record<string, number>> = { "480p": 480, "720p": 720, "1080p": 1080, "4k": 2160 }

/** A video frame: the short side from the resolution, the long side from the ratio (16:9 720p is 1280x720). */
export const videoSize = (ratio: string, resolution: string): readonly [number, number] => {
  const [w, h] = parseRatio(ratio)
  const short = videoShortSide[resolution] ?? 720
  return w >= h ? [even((short * w) / h), short] : [short, even((short * h) / w)]
}

/** Long side of an image per resolution. */
export const imageLongSide: Readonly<Record<string, number>> = { "1k": 1024, "2k": 2048, "4k": 3840 }

/** An image: the long side from the resolution, the short side from the ratio, a multiple of 8. */
export const imageSize = (ratio: string, resolution: string): readonly [number, number] => {
  const [w, h] = parseRatio(ratio)
  const long = imageLongSide[resolution] ?? 1024
  return w >= h ? [long, multipleOf8((long * h) / w)] : [multipleOf8((long * w) / h), long]
}
