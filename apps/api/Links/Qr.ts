import { Effect } from "effect"
import * as QRCode from "qrcode"

export interface QrOptions {
  readonly format?: "png" | "svg" | undefined
  readonly size?: number | undefined
  readonly margin?: number | undefined
  readonly ecc?: "L" | "M" | "Q" | "H" | undefined
}

/** A rendered QR code: its bytes (PNG) or text (SVG) and its media type. */
export type QrImage =
  | { readonly format: "png"; readonly contentType: "image/png"; readonly body: Uint8Array }
  | { readonly format: "svg"; readonly contentType: "image/svg+xml"; readonly body: string }

/**
 * The QR code of `text`, exactly `size` pixels wide (default 512, margin 4 modules, ecc M, PNG).
 * qrcode ignores a width smaller than the symbol plus its quiet zone, so the quiet zone gives
 * way first; and it floors (modules * (width / modules)), which floating point can leave a
 * pixel short, so the PNG asks for half a pixel more (the SVG takes the width as its attribute).
 */
export const renderQr = (text: string, params: QrOptions): Effect.Effect<QrImage> =>
  Effect.gen(function* () {
    const size = params.size ?? 512
    const errorCorrectionLevel = params.ecc ?? "M"
    const modules = QRCode.create(text, { errorCorrectionLevel }).modules.size
    const margin = Math.min(params.margin ?? 4, Math.floor((size - modules) / 2))
    const options = { margin, errorCorrectionLevel } as const
    if (params.format === "svg") {
      const svg = yield* Effect.promise(() => QRCode.toString(text, { ...options, width: size, type: "svg" }))
      return { format: "svg", contentType: "image/svg+xml", body: svg } as const
    }
    const png = yield* Effect.promise(() => QRCode.toBuffer(text, { ...options, width: size + 0.5, type: "png" }))
    return { format: "png", contentType: "image/png", body: png } as const
  })
