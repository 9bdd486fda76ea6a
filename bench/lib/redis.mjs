// A private redis-server for the benchmark: loopback, free port, no persistence.
import { createConnection } from 'node:net';
import { startRedis as startServer } from '../../test/support/redis-server.mjs';

/** Send one inline command and read one reply line (enough for PING/FLUSHALL/INFO sizes). */
export function redisCommand(port, ...args) {
  return new Promise((resolve, reject) => {
    const s = createConnection({ host: '127.0.0.1', port });
    let buf = '';
    s.setTimeout(5000, () => {
      s.destroy();
      reject(new Error('redis timeout'));
    });
    s.on('error', reject);
    s.on('connect', () => {
      const parts = args.map(String);
      s.write(`*${parts.length}\r\n` + parts.map((p) => `$${Buffer.byteLength(p)}\r\n${p}\r\n`).join(''));
    });
    s.on('data', (d) => {
      buf += d.toString();
      // Bulk string: $len\r\n<data>\r\n
      if (buf.startsWith('$')) {
        const nl = buf.indexOf('\r\n');
        const len = Number(buf.slice(1, nl));
        if (len < 0 || buf.length >= nl + 2 + len + 2) {
          s.end();
          resolve(len < 0 ? null : buf.slice(nl + 2, nl + 2 + len));
        }
      } else if (buf.includes('\r\n')) {
        s.end();
        if (buf.startsWith('-')) reject(new Error(buf.trim()));
        else resolve(buf.slice(1).trim());
      }
    });
  });
}

/**
 * A private redis-server for a benchmark run, started by the one Redis launcher of
 * tests and benchmarks (test/support/redis-server.mjs), with the raw-socket
 * helpers the bench uses on top. `tmp` is kept for the callers' signature.
 */
export async function startRedis(_tmp) {
  const r = await startServer();
  return {
    port: r.port,
    url: (db = 0) => `${r.url}/${db}`,
    get pid() {
      return r.pid;
    },
    cmd: (...a) => redisCommand(r.port, ...a),
    async usedMemory() {
      const info = await redisCommand(r.port, 'INFO', 'memory');
      return Number(/used_memory:(\d+)/.exec(info)?.[1] ?? 0);
    },
    stop: () => r.stop(),
  };
}

/**
 * Send many commands (arrays of strings) on one connection, pipelined, after
 * SELECT db; resolves when every reply has arrived. Error replies are counted.
 */
export function redisPipeline(port, db, commands) {
  return new Promise((resolve, reject) => {
    const s = createConnection({ host: '127.0.0.1', port });
    const enc = (parts) => `*${parts.length}\r\n` + parts.map((p) => `$${Buffer.byteLength(String(p))}\r\n${p}\r\n`).join('');
    const all = [['SELECT', String(db)], ...commands];
    let replies = 0;
    let errors = 0;
    let pending = '';
    s.on('error', reject);
    s.on('connect', () => {
      const chunk = 2000;
      for (let i = 0; i < all.length; i += chunk) s.write(all.slice(i, i + chunk).map(enc).join(''));
    });
    // Replies here are simple (+OK, :n, -ERR): count lines, skipping bulk payload lines.
    s.on('data', (d) => {
      pending += d.toString();
      let nl;
      while ((nl = pending.indexOf('\r\n')) >= 0) {
        const line = pending.slice(0, nl);
        if (line[0] === '$') {
          const len = Number(line.slice(1));
          if (len >= 0) {
            if (pending.length < nl + 2 + len + 2) break;
            pending = pending.slice(nl + 2 + len + 2);
          } else pending = pending.slice(nl + 2);
          replies++;
          continue;
        }
        pending = pending.slice(nl + 2);
        if (line[0] === '-') errors++;
        replies++;
      }
      if (replies >= all.length) {
        s.end();
        resolve({ replies, errors });
      }
    });
  });
}
