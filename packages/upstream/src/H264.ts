/**
 * A tiny H.264 encoder for the simulator's videos: one IDR frame of I_PCM macroblocks
 * (Constrained Baseline). No compression at all, but a standard bitstream every decoder
 * reads, which is what a simulated result needs.
 */

/** Writes bits MSB first; raw bytes go straight through once aligned. */
class BitWriter {
  private readonly out: Array<number> = []
  private current = 0
  private count = 0

  bit(value: number) {
    this.current = (this.current << 1) | (value & 1)
    if (++this.count === 8) {
      this.out.push(this.current)
      this.current = 0
      this.count = 0
    }
  }
  bits(width: number, value: number) {
    for (let i = width - 1; i >= 0; i--) this.bit(Math.floor(value / 2 ** i) & 1)
  }
  /** Unsigned Exp-Golomb. */
  ue(value: number) {
    const x = value + 1
    const length = 32 - Math.clz32(x)
    this.bits(length - 1, 0)
    this.bits(length, x)
  }
  /** Signed Exp-Golomb. */
  se(value: number) {
    this.ue(value <= 0 ? -2 * value : 2 * value - 1)
  }
  alignZero() {
    while (this.count !== 0) this.bit(0)
  }
  /** Appends bytes; the writer must be aligned. */
  bytes(values: Uint8Array) {
    for (let i = 0; i < values.length; i++) this.out.push(values[i]!)
  }
  trailing() {
    this.bit(1)
    this.alignZero()
  }
  done(): Uint8Array {
    return Uint8Array.from(this.out)
  }
}

/** Inserts emulation-prevention bytes and the NAL header: an RBSP becomes a NAL unit. */
const nal = (header: number, rbsp: Uint8Array): Uint8Array => {
  const out = new Uint8Array(1 + rbsp.length + Math.ceil(rbsp.length / 2))
  out[0] = header
  let at = 1
  let zeros = 0
  for (let i = 0; i < rbsp.length; i++) {
    const byte = rbsp[i]!
    if (zeros >= 2 && byte <= 3) {
      out[at++] = 3
      zeros = 0
    }
    out[at++] = byte
    zeros = byte === 0 ? zeros + 1 : 0
  }
  return out.subarray(0, at)
}

/** Profile (Baseline, constrained) and level (5.1, enough for 4k) we declare. */
export const profileIdc = 66
export const constraintFlags = 0xc0
export const levelIdc = 51

const sequenceParameterSet = (width: number, height: number): Uint8Array => {
  const mbWidth = Math.ceil(width / 16)
  const mbHeight = Math.ceil(height / 16)
  const w = new BitWriter()
  w.bits(8, profileIdc)
  w.bits(8, constraintFlags)
  w.bits(8, levelIdc)
  w.ue(0) // seq_parameter_set_id
  w.ue(0) // log2_max_frame_num_minus4
  w.ue(2) // pic_order_cnt_type
  w.ue(0) // max_num_ref_frames
  w.bit(0) // gaps_in_frame_num_value_allowed_flag
  w.ue(mbWidth - 1)
  w.ue(mbHeight - 1)
  w.bit(1) // frame_mbs_only_flag
  w.bit(1) // direct_8x8_inference_flag
  const cropRight = (mbWidth * 16 - width) / 2
  const cropBottom = (mbHeight * 16 - height) / 2
  if (cropRight > 0 || cropBottom > 0) {
    w.bit(1)
    w.ue(0)
    w.ue(cropRight)
    w.ue(0)
    w.ue(cropBottom)
  } else {
    w.bit(0)
  }
  w.bit(0) // vui_parameters_present_flag
  w.trailing()
  return nal(0x67, w.done())
}

const pictureParameterSet = (): Uint8Array => {
  const w = new BitWriter()
  w.ue(0) // pic_parameter_set_id
  w.ue(0) // seq_parameter_set_id
  w.bit(0) // entropy_coding_mode_flag (CAVLC)
  w.bit(0) // bottom_field_pic_order_in_frame_present_flag
  w.ue(0) // num_slice_groups_minus1
  w.ue(0) // num_ref_idx_l0_default_active_minus1
  w.ue(0) // num_ref_idx_l1_default_active_minus1
  w.bit(0) // weighted_pred_flag
  w.bits(2, 0) // weighted_bipred_idc
  w.se(0) // pic_init_qp_minus26
  w.se(0) // pic_init_qs_minus26
  w.se(0) // chroma_qp_index_offset
  w.bit(1) // deblocking_filter_control_present_flag
  w.bit(0) // constrained_intra_pred_flag
  w.bit(0) // redundant_pic_cnt_present_flag
  w.trailing()
  return nal(0x68, w.done())
}

/** A colour per 64-row band from the seed, as [r, g, b] at the left and right edges. */
const bandColours = (seed: number, band: number) => {
  const mix = (salt: number) => {
    let h = (seed ^ Math.imul(salt + 1, 0x9e3779b1)) >>> 0
    h = Math.imul(h ^ (h >>> 16), 0x85ebca6b) >>> 0
    return (h ^ (h >>> 13)) >>> 0
  }
  const a = mix(band * 2)
  const b = mix(band * 2 + 1)
  return [[a & 255, (a >>> 8) & 255, (a >>> 16) & 255], [b & 255, (b >>> 8) & 255, (b >>> 16) & 255]] as const
}

const clamp = (value: number) => Math.max(1, Math.min(254, Math.round(value)))

/** One IDR picture of I_PCM macroblocks showing horizontal gradients in bands. */
const idrSlice = (width: number, height: number, seed: number): Uint8Array => {
  const mbWidth = Math.ceil(width / 16)
  const mbHeight = Math.ceil(height / 16)
  const w = new BitWriter()
  w.ue(0) // first_mb_in_slice
  w.ue(7) // slice_type: I (all slices)
  w.ue(0) // pic_parameter_set_id
  w.bits(4, 0) // frame_num
  w.ue(0) // idr_pic_id
  w.bit(0) // no_output_of_prior_pics_flag
  w.bit(0) // long_term_reference_flag
  w.se(0) // slice_qp_delta
  w.ue(1) // disable_deblocking_filter_idc
  const macroblock = new Uint8Array(384)
  for (let my = 0; my < mbHeight; my++) {
    const [left, right] = bandColours(seed, Math.floor((my * 16) / 64))
    for (let mx = 0; mx < mbWidth; mx++) {
      // Colour per column of this macroblock; rows repeat within it.
      for (let x = 0; x < 16; x++) {
        const t = Math.min(1, (mx * 16 + x) / Math.max(1, width - 1))
        const [r, g, b] = [0, 1, 2].map((c) => left[c]! + (right[c]! - left[c]!) * t) as [number, number, number]
        const y = clamp(16 + 0.257 * r + 0.504 * g + 0.098 * b)
        for (let row = 0; row < 16; row++) macroblock[row * 16 + x] = y
        if (x % 2 === 0) {
          const cb = clamp(128 - 0.148 * r - 0.291 * g + 0.439 * b)
          const cr = clamp(128 + 0.439 * r - 0.368 * g - 0.071 * b)
          for (let row = 0; row < 8; row++) {
            macroblock[256 + row * 8 + x / 2] = cb
            macroblock[320 + row * 8 + x / 2] = cr
          }
        }
      }
      w.ue(25) // mb_type I_PCM
      w.alignZero() // pcm_alignment_zero_bit
      w.bytes(macroblock)
    }
  }
  w.trailing()
  return nal(0x65, w.done())
}

/** The parameter sets and the single coded picture of a width x height frame. */
export const encodeFrame = (options: { readonly width: number; readonly height: number; readonly seed: number }) => ({
  sps: sequenceParameterSet(options.width, options.height),
  pps: pictureParameterSet(),
  idr: idrSlice(options.width, options.height, options.seed)
})
