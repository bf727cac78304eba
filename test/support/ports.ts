import * as net from "node:net"

/** A TCP port on 127.0.0.1 that nothing listens on right now. */
export const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as net.AddressInfo).port
      s.close(() => resolve(p))
    })
  })
