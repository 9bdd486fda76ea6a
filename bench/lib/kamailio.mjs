// Kamailio (Debian package) as the reference registrar: bench/kamailio/kamailio.cfg.
import { createSocket } from 'node:dgram';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { freePort, start, stop, waitFor } from './proc.mjs';
import { redisPipeline } from './redis.mjs';

const md5 = (s) => createHash('md5').update(s).digest('hex');

/** One OPTIONS over UDP to `uri`; resolves true when any 200 comes back within 500 ms. */
export function optionsPing(port, uri = `sip:ping@127.0.0.1:${port}`) {
  return new Promise((resolve) => {
    const s = createSocket('udp4');
    const done = (v) => {
      clearTimeout(t);
      s.close();
      resolve(v);
    };
    const t = setTimeout(() => done(false), 500);
    s.on('message', (m) => done(m.toString().startsWith('SIP/2.0 200')));
    s.on('error', () => done(false));
    s.bind(0, '127.0.0.1', () => {
      const lp = s.address().port;
      const msg =
        `OPTIONS ${uri} SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:${lp};branch=z9hG4bK${Date.now()}${Math.random().toString(36).slice(2)};rport\r\n` +
        `Max-Forwards: 70\r\nFrom: <sip:ping@127.0.0.1>;tag=p\r\nTo: <sip:ping@127.0.0.1>\r\nCall-ID: ping-${Date.now()}-${Math.random()}\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n`;
      s.send(msg, port, '127.0.0.1');
    });
  });
}

/**
 * Start Kamailio. variant 'memory' (usrloc db_mode 0, htable credentials from a
 * db_text table) or 'redis' (usrloc db_mode 1 + auth_db, both on db_redis, in
 * Redis database `redisDb`). `users`: [{user,password}], all in `domain`. `children`: UDP
 * and TCP worker processes each (2 by default: as many as this machine's cores, which on
 * 2 cores costs Kamailio less CPU per registration than its sample config's 8 + 8).
 */
export async function startKamailio({ root, tmp, variant, users, domain, redis, redisDb = 1, extraArgs = [], redisAuth = false, children = 2 }) {
  const name = `kamailio-${variant}`;
  const dir = join(tmp, name);
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const args = ['-f', join(root, 'bench/kamailio/kamailio.cfg'), '-DD', '-E', '-m', '512', '-M', '16', '-w', dir, '-P', join(dir, 'kamailio.pid')];
  args.push('-l', `udp:127.0.0.1:${port}`, '-l', `tcp:127.0.0.1:${port}`);
  // Worker processes per transport (`children`/`tcp_children` of kamailio.cfg).
  args.push('-A', `CHILDREN=${children}`, '-A', `TCP_CHILDREN=${children}`);
  if (variant === 'redis') {
    const url = `redis://127.0.0.1:${redis.port}/${redisDb}`;
    const cmds = [['FLUSHDB']];
    cmds.push(['HSET', 'version:entry::location', 'table_name', 'location', 'table_version', '9']);
    cmds.push(['HSET', 'version:entry::subscriber', 'table_name', 'subscriber', 'table_version', '7']);
    users.forEach((u, i) =>
      cmds.push([
        'HSET', `subscriber:entry::${u.user}:${domain}`,
        'id', String(i + 1), 'username', u.user, 'domain', domain, 'password', '',
        'ha1', md5(`${u.user}:${domain}:${u.password}`), 'ha1b', '',
      ]),
    );
    const r = await redisPipeline(redis.port, redisDb, cmds);
    if (r.errors) throw new Error(`loading subscribers into Redis: ${r.errors} errors`);
    args.push('-A', 'WITH_REDIS', '-A', `REDIS_URL="${url}"`, '-A', `SCHEMA_PATH="${join(root, 'bench/kamailio/db_redis')}"`);
    if (redisAuth) args.push('-A', 'WITH_REDIS_AUTH');
  }
  if (variant !== 'redis' || !redisAuth) {
    const db = join(dir, 'dbtext');
    mkdirSync(db, { recursive: true });
    writeFileSync(join(db, 'version'), 'table_name(str) table_version(int)\nsubscriber:7\n');
    writeFileSync(
      join(db, 'subscriber'),
      'id(int,auto) username(str) domain(str) ha1(str)\n' +
        users.map((u, i) => `${i + 1}:${u.user}:${domain.replace(/:/g, '\\:')}:${md5(`${u.user}:${domain}:${u.password}`)}`).join('\n') +
        '\n',
    );
    args.push('-A', `DBTEXT_URL="text://${db}"`);
  }
  const logFile = join(tmp, `${name}.log`);
  const child = start('kamailio', [...args, ...extraArgs], { logFile, cwd: dir });
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`kamailio exited (${child.exitCode}); see ${logFile}`);
      return optionsPing(port);
    },
    30000,
    'kamailio to answer OPTIONS',
    300,
  );
  return { name, child, pid: child.pid, logFile, ports: { udp: port, tcp: port }, stop: () => stop(child, 10000) };
}
