/**
 * Ports for the few places that cannot listen on port 0 and read back what they got: a
 * client that must find no server, and a program that must be told its port before it
 * listens (the README's server.mjs builds its URLs from PORT first).
 */
import { type AddressInfo, createServer } from "node:net"

/** A loopback port nothing listens on: one the system handed out, closed again. */
export const closedPort = () =>
  new Promise<number>((resolve) => {
    const probe = createServer().listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as AddressInfo
      probe.close(() => resolve(port))
    })
  })
