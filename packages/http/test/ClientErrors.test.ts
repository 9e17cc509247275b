import { describe, expect, it } from "@effect/vitest"
import { ClientErrors } from "../src/index.js"

const parseError = (code: string, rawPacket?: string) => Object.assign(new Error(code), { code, rawPacket: rawPacket === undefined ? undefined : Buffer.from(rawPacket) })

describe("ClientErrors", () => {
  it("maps node:http's parse errors onto the envelope's codes", () => {
    expect(ClientErrors.answerFor(parseError("HPE_HEADER_OVERFLOW"))).toEqual({ code: 431, msg: "request headers are too large" })
    expect(ClientErrors.answerFor(parseError("ERR_HTTP_REQUEST_TIMEOUT")).code).toBe(408)
    expect(ClientErrors.answerFor(parseError("HPE_INVALID_HEADER_TOKEN"))).toEqual({ code: 400, msg: "the request could not be read" })
    expect(ClientErrors.answerFor(parseError("HPE_INVALID_METHOD", "FOO /api/v1/tasks HTTP/1.1\r\nHost: x\r\n\r\n"))).toEqual({
      code: 405,
      msg: "method FOO is not allowed here; use GET",
      headers: { allow: "GET" }
    })
    expect(ClientErrors.answerFor(parseError("HPE_INVALID_METHOD", "FOO /nowhere HTTP/1.1\r\n\r\n"))).toEqual({ code: 404, msg: "not found: /nowhere" })
    // A method that is no token is not echoed.
    expect(ClientErrors.answerFor(parseError("HPE_INVALID_METHOD", "F\"O /api/v1/tasks HTTP/1.1\r\n\r\n")).msg).toBe("this method is not allowed here; use GET")
    expect(ClientErrors.answerFor(parseError("HPE_INVALID_METHOD", "garbage"))).toEqual({ code: 400, msg: "the request could not be read" })
  })

  it("writes a whole HTTP/1.1 response: status line, JSON, Content-Length, Connection: close", () => {
    expect(ClientErrors.rawResponse({ code: 431, msg: "request headers are too large" })).toBe(
      "HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\ncontent-length: 50\r\nconnection: close\r\n\r\n" +
        `{"code":431,"msg":"request headers are too large"}`
    )
  })
})
