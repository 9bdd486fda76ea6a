import { describe, expect, it } from 'vitest';
import { dgramHasReusePort } from '../../../src/transport/udp.js';

/** docs/workers.md "Sockets": dgram `reusePort` arrived in Node 23.1.0 and 22.12.0. */
describe('dgramHasReusePort', () => {
  it('is true from Node 22.12 and 23.1 on, on Linux and FreeBSD', () => {
    for (const v of ['22.12.0', '22.23.3', '23.1.0', '24.21.0', '26.10.0', '30.0.0']) {
      expect(dgramHasReusePort(v, 'linux')).toBe(true);
    }
    expect(dgramHasReusePort('24.0.0', 'freebsd')).toBe(true);
  });
  it('is false before, and on platforms where dgram refuses the option', () => {
    for (const v of ['18.20.0', '20.20.2', '21.7.3', '22.11.0', '23.0.0']) expect(dgramHasReusePort(v, 'linux')).toBe(false);
    for (const p of ['darwin', 'win32']) expect(dgramHasReusePort('26.10.0', p)).toBe(false);
  });
});
