/**
 * A free loopback port, for suites that start the standalone server as a child process.
 */
import { createServer } from "node:net"

/** A TCP port on 127.0.0.1 that was free a moment ago. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const server = createServer()
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
