/**
 * A loopback port free for both TCP and UDP a moment ago: the one free-port
 * helper of the tests and the benchmarks (bench/ imports it too). SIPp and the
 * edge bind both protocols on one number, and SIPp's own default (5060) is shared
 * by every run, where another suite's stale binding may still point.
 */
import { createSocket } from 'node:dgram';
import { createServer } from 'node:net';

/** @returns {Promise<number>} */
function tcpPort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (addr && typeof addr === 'object' ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

/** Whether a loopback UDP port could be bound a moment ago. @param {number} port @returns {Promise<boolean>} */
export function udpFree(port) {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    s.once('error', () => {
      s.close();
      resolve(false);
    });
    s.bind(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

/** @returns {Promise<number>} */
export async function freePort() {
  for (let i = 0; i < 50; i++) {
    const port = await tcpPort();
    if (await udpFree(port)) return port;
  }
  throw new Error('no loopback port free for both TCP and UDP after 50 tries');
}
