/**
 * A loopback port that was free for both UDP and TCP a moment ago. For clients that
 * would otherwise pick a well-known port themselves (SIPp takes 5060 when free, where
 * another suite's stale binding may still point).
 */
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

function tcpPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr !== 'string' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

function udpFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => {
      s.close();
      resolve(false);
    });
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export async function freeUdpTcpPort(): Promise<number> {
  for (let i = 0; i < 20; i++) {
    const port = await tcpPort();
    if (await udpFree(port)) return port;
  }
  throw new Error('no port free for both UDP and TCP after 20 tries');
}
