/**
 * RTPENGINE_NG and MEDIA_RELAY (README "Configuration", docs/media.md): the engine
 * list with optional weights, the relay mode and its default, and the clear error
 * (exit 2) a bad value gets.
 */
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';
import { MAIN, ROOT } from '../support/edge-process.mjs';

const load = (env: Record<string, string>) => loadConfig(env, { configFile: null });

describe('RTPENGINE_NG and MEDIA_RELAY', () => {
  it('no engine: no relay, SDP untouched', () => {
    const c = load({});
    expect(c.rtpengineNg).toBeNull();
    expect(c.mediaRelay).toBe('never');
    expect(load({ MEDIA_RELAY: 'never' }).mediaRelay).toBe('never');
  });

  it('reads host:port[=weight] lists, IPv6 in brackets; the relay defaults to bridge', () => {
    const c = load({ RTPENGINE_NG: '127.0.0.1:2223, rtp2.example.net:2224=3,[::1]:2225=0' });
    expect(c.rtpengineNg).toEqual([
      { host: '127.0.0.1', port: 2223, weight: 1 },
      { host: 'rtp2.example.net', port: 2224, weight: 3 },
      { host: '::1', port: 2225, weight: 0 },
    ]);
    expect(c.mediaRelay).toBe('bridge');
    expect(load({ RTPENGINE_NG: '10.0.0.9:2223', MEDIA_RELAY: 'ALWAYS' }).mediaRelay).toBe('always');
    expect(load({ RTPENGINE_NG: '10.0.0.9:2223', MEDIA_RELAY: 'never' }).mediaRelay).toBe('never');
  });

  it.each([
    [{ RTPENGINE_NG: '127.0.0.1' }, /RTPENGINE_NG: each engine must be host:port or host:port=weight/],
    [{ RTPENGINE_NG: '127.0.0.1:0' }, /RTPENGINE_NG: each engine must be/],
    [{ RTPENGINE_NG: '127.0.0.1:70000' }, /RTPENGINE_NG: each engine must be/],
    [{ RTPENGINE_NG: 'udp:127.0.0.1:2223' }, /RTPENGINE_NG: each engine must be/],
    [{ RTPENGINE_NG: '127.0.0.1:2223=1001' }, /weight 0-1000/],
    [{ RTPENGINE_NG: '[nothex]:2223' }, /RTPENGINE_NG: each engine must be/],
    [{ RTPENGINE_NG: '[1.2.3.4]:2223' }, /is not an IPv6 address/],
    [{ RTPENGINE_NG: 'a:1,A:1' }, /listed twice/],
    [{ RTPENGINE_NG: 'a:1=0,b:2=0' }, /every engine has weight 0/],
    [{ MEDIA_RELAY: 'sometimes' }, /MEDIA_RELAY must be bridge, always or never, got "sometimes"/],
    [{ MEDIA_RELAY: 'always' }, /MEDIA_RELAY=always needs RTPENGINE_NG/],
    [{ MEDIA_RELAY: 'bridge' }, /MEDIA_RELAY=bridge needs RTPENGINE_NG/],
  ])('refuses %j with a clear ConfigError', (env, re) => {
    expect(() => load(env)).toThrowError(ConfigError);
    expect(() => load(env)).toThrowError(re);
  });

  it('the server stops with one line naming the variable and exit code 2', () => {
    const r = spawnSync(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env.PATH, RTPENGINE_NG: '127.0.0.1:2223', MEDIA_RELAY: 'maybe', SIP_EDGE_CONFIG: '' },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(r.status).toBe(2);
    expect(r.stderr + r.stdout).toMatch(/MEDIA_RELAY must be bridge, always or never, got "maybe"/);
  });
});
