// Exercises the raw addon API (open on 127.0.0.1 and on ::, receive with truncation, IPv6 peers,
// sendmmsg with forced EAGAIN → backlog → writable drain, double close) for src/transport/native/asan.sh,
// which runs it under AddressSanitizer and UBSan. Exits 1 when nothing went through.
const dgram = require('dgram');
const m = { exports: {} }; process.dlopen(m, process.argv[2]); const a = m.exports;
let got = 0, t;
const open = (host, slotSize) => {
  const r = a.open(host, 0, false, 1 << 20, 1 << 20, 8, slotSize, 16, 65536, (n) => {
    const meta = new Uint32Array(r[3]);
    for (let i = 0; i < n; i++) if (meta[i * a.RMETA_WORDS] > 0) got++;
    // echo back the first of the batch to the sender
    const sm = new Uint32Array(r[5]); const ss = Buffer.from(r[4]);
    let k = 0, off = 0;
    for (let i = 0; i < n && k < 16; i++) { const len = meta[i * a.RMETA_WORDS]; if (!len) continue; const fam = meta[i*a.RMETA_WORDS+2]; if (fam !== 4) continue; const v4 = meta[i*a.RMETA_WORDS+3];
      Buffer.from(r[2]).copy(ss, off, i * slotSize, i * slotSize + len);
      const d = a.pton(`${v4>>>24}.${(v4>>>16)&255}.${(v4>>>8)&255}.${v4&255}`);
      sm.set([off, len, meta[i*a.RMETA_WORDS+1], d[0], d[1], d[2], d[3], d[4]], k * a.SMETA_WORDS); off += len; k++; }
    if (k % 3 === 0) a.failSends(r[0], 1);
    a.flush(r[0], k);
  });
  return r;
};
const e4 = open('127.0.0.1', 1024), e6 = open('::', 2048);
const c = dgram.createSocket('udp4'); let back = 0; c.on('message', () => back++);
const c6 = dgram.createSocket('udp6'); c6.on('message', () => back++);
c.bind(0, '127.0.0.1', () => c6.bind(0, '::1', () => {
  for (let i = 0; i < 3000; i++) {
    const big = i % 50 === 0 ? 3000 : 100 + (i % 900);
    c.send(Buffer.alloc(big, i & 255), e4[1], '127.0.0.1');
    c.send(Buffer.alloc(big, 1), e6[1], '127.0.0.1');
    if (i % 10 === 0) c6.send(Buffer.alloc(200, 2), e6[1], '::1');
  }
  setTimeout(() => {
    const st4 = new Float64Array(e4[6]), st6 = new Float64Array(e6[6]);
    console.log('received', got, 'echoed back', back, 'stats4', Array.from(st4).join(','), 'stats6', Array.from(st6).join(','));
    a.close(e4[0]); a.close(e6[0]); a.close(e6[0]); c.close(); c6.close();
    global.gc && global.gc();
    setTimeout(() => { console.log('done'); process.exit(got > 0 && back > 0 && st6[7] > 0 ? 0 : 1); }, 200);
  }, 2000);
}));
