import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  buildChallenge,
  computeHa1,
  credentialAlgorithm,
  dummyHa1,
  nonceCount,
  verifyDigest,
  type DigestAlgorithm,
} from '../../../src/auth/digest.js';
import type { DigestCredentials } from '../../../src/sip/message.js';

function creds(params: Record<string, string>, scheme = 'Digest'): DigestCredentials {
  return { scheme, params: new Map(Object.entries(params)) };
}

/** Independent reference implementation, straight from RFC 7616 §3.4.1. */
function hex(algorithm: DigestAlgorithm, s: string): string {
  return createHash(algorithm === 'MD5' ? 'md5' : 'sha256').update(s, 'utf8').digest('hex');
}

// RFC 7616 §3.9.1 "Example with SHA-256 and MD5".
const RFC7616 = {
  username: 'Mufasa',
  password: 'Circle of Life',
  realm: 'http-auth@example.org',
  nonce: '7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v',
  cnonce: 'f2/wE4q74E6zIJEtWaHKaf5wv/H5QzzpXusqGemxURZJ',
  nc: '00000001',
  qop: 'auth',
  method: 'GET',
  uri: '/dir/index.html',
  opaque: 'FQhe/qaU925kfnzjCev0ciny7QMkPqMAFRtzCUYo5tdS',
};
const RFC7616_RESPONSE: Record<DigestAlgorithm, string> = {
  MD5: '8ca523f5e9506fed4657c9700eebdbec',
  'SHA-256': '753927fa0e85d155564e2e272a28d1802ca10daf4496794697cf8db5856cb6c1',
};

function rfc7616Creds(algorithm: DigestAlgorithm, overrides: Record<string, string> = {}): DigestCredentials {
  const { username, realm, nonce, cnonce, nc, qop, uri, opaque } = RFC7616;
  return creds({
    username, realm, uri, algorithm, nonce, nc, cnonce, qop, opaque,
    response: RFC7616_RESPONSE[algorithm],
    ...overrides,
  });
}

describe('computeHa1()', () => {
  it('hashes username:realm:password with MD5 as lower-case hex (RFC 7616 §3.4.2)', () => {
    const ha1 = computeHa1('MD5', 'Mufasa', 'http-auth@example.org', 'Circle of Life');
    expect(ha1).toBe(hex('MD5', 'Mufasa:http-auth@example.org:Circle of Life'));
    expect(ha1).toMatch(/^[0-9a-f]{32}$/);
  });

  it('hashes username:realm:password with SHA-256 as lower-case hex', () => {
    const ha1 = computeHa1('SHA-256', 'Mufasa', 'http-auth@example.org', 'Circle of Life');
    expect(ha1).toBe(hex('SHA-256', 'Mufasa:http-auth@example.org:Circle of Life'));
    expect(ha1).toMatch(/^[0-9a-f]{64}$/);
  });

  it('encodes non-ASCII passwords as UTF-8', () => {
    expect(computeHa1('MD5', 'bob', 'r', 'pässwörd')).toBe(
      createHash('md5').update(Buffer.from('bob:r:pässwörd', 'utf8')).digest('hex'),
    );
  });
});

describe('verifyDigest()', () => {
  describe('RFC 7616 §3.9.1 worked example (qop=auth)', () => {
    for (const algorithm of ['MD5', 'SHA-256'] as const) {
      it(`accepts the RFC's ${algorithm} response`, () => {
        const ha1 = computeHa1(algorithm, RFC7616.username, RFC7616.realm, RFC7616.password);
        expect(verifyDigest(rfc7616Creds(algorithm), { method: RFC7616.method, ha1, algorithm })).toBe('ok');
      });

      it(`answers bad-response for the ${algorithm} response when the password is wrong`, () => {
        const ha1 = computeHa1(algorithm, RFC7616.username, RFC7616.realm, 'Circle of Death');
        expect(verifyDigest(rfc7616Creds(algorithm), { method: RFC7616.method, ha1, algorithm })).toBe('bad-response');
      });
    }

    it('accepts an upper-case hex response', () => {
      const ha1 = computeHa1('MD5', RFC7616.username, RFC7616.realm, RFC7616.password);
      const c = rfc7616Creds('MD5', { response: RFC7616_RESPONSE.MD5.toUpperCase() });
      expect(verifyDigest(c, { method: 'GET', ha1, algorithm: 'MD5' })).toBe('ok');
    });

    it('answers bad-response when the method differs from the one hashed (A2 covers the method)', () => {
      const ha1 = computeHa1('SHA-256', RFC7616.username, RFC7616.realm, RFC7616.password);
      expect(verifyDigest(rfc7616Creds('SHA-256'), { method: 'POST', ha1, algorithm: 'SHA-256' })).toBe('bad-response');
    });

    it('answers bad-response when nc, cnonce or nonce were altered', () => {
      const ha1 = computeHa1('MD5', RFC7616.username, RFC7616.realm, RFC7616.password);
      const alterations: Array<Record<string, string>> = [{ nc: '00000002' }, { cnonce: 'other' }, { nonce: 'other' }];
      for (const o of alterations) {
        expect(verifyDigest(rfc7616Creds('MD5', o), { method: 'GET', ha1, algorithm: 'MD5' })).toBe('bad-response');
      }
    });
  });

  describe('RFC 2069 form (no qop), as many desk phones send', () => {
    // RFC 2069 §2.4 example inputs; response = H(HA1:nonce:H(method:uri)).
    const ha1 = computeHa1('MD5', 'Mufasa', 'testrealm@host.com', 'CircleOfLife');
    const nonce = 'dcd98b7102dd2f0e8b11d0f600bfb0c093';
    const base = { username: 'Mufasa', realm: 'testrealm@host.com', nonce, uri: '/dir/index.html' };

    it('accepts H(HA1:nonce:H(method:uri)) without nc or cnonce', () => {
      const response = hex('MD5', `${ha1}:${nonce}:${hex('MD5', 'GET:/dir/index.html')}`);
      expect(response).toBe('1949323746fe6a43ef61f9606e7febea');
      expect(verifyDigest(creds({ ...base, response }), { method: 'GET', ha1, algorithm: 'MD5' })).toBe('ok');
    });

    it('accepts the no-qop form with SHA-256', () => {
      const sha1 = computeHa1('SHA-256', 'Mufasa', 'testrealm@host.com', 'CircleOfLife');
      const response = hex('SHA-256', `${sha1}:${nonce}:${hex('SHA-256', 'REGISTER:/dir/index.html')}`);
      const c = creds({ ...base, algorithm: 'SHA-256', response });
      expect(verifyDigest(c, { method: 'REGISTER', ha1: sha1, algorithm: 'SHA-256' })).toBe('ok');
    });

    it('does not accept a qop=auth response when the credentials omit qop', () => {
      const qopResponse = hex(
        'MD5',
        `${ha1}:${nonce}:00000001:abc:auth:${hex('MD5', 'GET:/dir/index.html')}`,
      );
      const c = creds({ ...base, nc: '00000001', cnonce: 'abc', response: qopResponse });
      expect(verifyDigest(c, { method: 'GET', ha1, algorithm: 'MD5' })).toBe('bad-response');
    });
  });

  describe('uri: hashed as sent in the Authorization header, not the Request-URI', () => {
    const realm = 'acme.sip.localhost';
    const ha1 = computeHa1('MD5', 'alice', realm, 's3cret');
    const nonce = 'abcDEF123';
    // SIPp's [authentication] hashes sip:<server ip>:<port>, while the Request-URI is sip:<domain>.
    const authUri = 'sip:192.0.2.10:5060';
    const requestUri = 'sip:acme.sip.localhost';

    function responseOver(uri: string): string {
      return hex('MD5', `${ha1}:${nonce}:00000001:c0ffee:auth:${hex('MD5', `REGISTER:${uri}`)}`);
    }

    it('accepts a response computed over the uri parameter even when it differs from the Request-URI', () => {
      const c = creds({ username: 'alice', realm, nonce, uri: authUri, qop: 'auth', nc: '00000001', cnonce: 'c0ffee', response: responseOver(authUri) });
      expect(verifyDigest(c, { method: 'REGISTER', ha1, algorithm: 'MD5' })).toBe('ok');
    });

    it('answers bad-response for a response computed over another URI than the uri parameter', () => {
      const c = creds({ username: 'alice', realm, nonce, uri: authUri, qop: 'auth', nc: '00000001', cnonce: 'c0ffee', response: responseOver(requestUri) });
      expect(verifyDigest(c, { method: 'REGISTER', ha1, algorithm: 'MD5' })).toBe('bad-response');
    });
  });

  describe('refusals', () => {
    const ha1 = computeHa1('MD5', RFC7616.username, RFC7616.realm, RFC7616.password);
    const opts = { method: 'GET', ha1, algorithm: 'MD5' as const };

    it('answers unsupported-qop for qop=auth-int', () => {
      expect(verifyDigest(rfc7616Creds('MD5', { qop: 'auth-int' }), opts)).toBe('unsupported-qop');
    });

    it('answers unsupported-qop for an unknown qop token', () => {
      expect(verifyDigest(rfc7616Creds('MD5', { qop: 'auth,auth-int' }), opts)).toBe('unsupported-qop');
    });

    it.each(['MD5-sess', 'SHA-256-sess', 'SHA-512-256', 'SHA-1'])('answers unsupported-algorithm for algorithm=%s', (algorithm) => {
      expect(verifyDigest(rfc7616Creds('MD5', { algorithm }), opts)).toBe('unsupported-algorithm');
    });

    it('answers unsupported-algorithm when the credentials name another algorithm than the HA1 given', () => {
      expect(verifyDigest(rfc7616Creds('SHA-256'), opts)).toBe('unsupported-algorithm');
    });

    it.each(['username', 'realm', 'nonce', 'uri', 'response'])('answers malformed when %s is missing', (name) => {
      const c = rfc7616Creds('MD5');
      c.params.delete(name);
      expect(verifyDigest(c, opts)).toBe('malformed');
    });

    it.each(['nc', 'cnonce'])('answers malformed when qop=auth comes without %s', (name) => {
      const c = rfc7616Creds('MD5');
      c.params.delete(name);
      expect(verifyDigest(c, opts)).toBe('malformed');
    });

    it.each(['1', '0000000g', '000000001', ''])('answers malformed for nc=%j (must be 8 hex digits)', (nc) => {
      expect(verifyDigest(rfc7616Creds('MD5', { nc }), opts)).toBe('malformed');
    });

    it('answers malformed for a response that is not hex of the algorithm length', () => {
      expect(verifyDigest(rfc7616Creds('MD5', { response: RFC7616_RESPONSE['SHA-256'] }), opts)).toBe('malformed');
      expect(verifyDigest(rfc7616Creds('MD5', { response: 'z'.repeat(32) }), opts)).toBe('malformed');
    });

    it('answers malformed for a scheme other than Digest', () => {
      const c = rfc7616Creds('MD5');
      expect(verifyDigest({ scheme: 'Basic', params: c.params }, opts)).toBe('malformed');
    });

    it('accepts the Digest scheme case-insensitively', () => {
      const c = rfc7616Creds('MD5');
      expect(verifyDigest({ scheme: 'DIGEST', params: c.params }, opts)).toBe('ok');
    });

    it('throws on an HA1 that does not fit the algorithm, a caller bug', () => {
      expect(() => verifyDigest(rfc7616Creds('MD5'), { ...opts, ha1: 'abc' })).toThrow(RangeError);
      expect(() => verifyDigest(rfc7616Creds('MD5'), { ...opts, ha1: ha1.toUpperCase() })).toThrow(RangeError);
    });
  });
});

describe('credentialAlgorithm()', () => {
  it('is MD5 when the algorithm parameter is absent (RFC 7616 §3.3)', () => {
    expect(credentialAlgorithm(creds({ username: 'a' }))).toBe('MD5');
  });

  it.each([
    ['MD5', 'MD5'],
    ['md5', 'MD5'],
    ['SHA-256', 'SHA-256'],
    ['sha-256', 'SHA-256'],
  ] as const)('reads algorithm=%s as %s (case-insensitive)', (value, expected) => {
    expect(credentialAlgorithm(creds({ algorithm: value }))).toBe(expected);
  });

  it.each(['MD5-sess', 'SHA-256-sess', 'SHA-512-256', 'SHA-512-256-sess', ''])('is null for unsupported algorithm=%j', (value) => {
    expect(credentialAlgorithm(creds({ algorithm: value }))).toBeNull();
  });
});

describe('nonceCount()', () => {
  it('parses the 8-hex-digit nc as a number', () => {
    expect(nonceCount(creds({ nc: '0000000a' }))).toBe(10);
    expect(nonceCount(creds({ nc: 'FFFFFFFF' }))).toBe(0xffffffff);
  });

  it('is null when nc is absent or not 8 hex digits', () => {
    expect(nonceCount(creds({}))).toBeNull();
    expect(nonceCount(creds({ nc: '1' }))).toBeNull();
    expect(nonceCount(creds({ nc: '-0000001' }))).toBeNull();
  });
});

describe('buildChallenge()', () => {
  it('builds realm, nonce, algorithm and qop="auth" in RFC 7616 §3.3 form', () => {
    expect(buildChallenge({ realm: 'acme.sip.localhost', nonce: 'n0nce', algorithm: 'SHA-256' })).toBe(
      'Digest realm="acme.sip.localhost", nonce="n0nce", algorithm=SHA-256, qop="auth"',
    );
    expect(buildChallenge({ realm: 'acme.sip.localhost', nonce: 'n0nce', algorithm: 'MD5' })).toBe(
      'Digest realm="acme.sip.localhost", nonce="n0nce", algorithm=MD5, qop="auth"',
    );
  });

  it('adds stale=true only when the nonce was stale', () => {
    expect(buildChallenge({ realm: 'r', nonce: 'n', algorithm: 'MD5', stale: true })).toBe(
      'Digest realm="r", nonce="n", algorithm=MD5, qop="auth", stale=true',
    );
    expect(buildChallenge({ realm: 'r', nonce: 'n', algorithm: 'MD5', stale: false })).not.toContain('stale');
  });

  it('adds a quoted opaque when given', () => {
    expect(buildChallenge({ realm: 'r', nonce: 'n', algorithm: 'SHA-256', stale: true, opaque: 'xyz' })).toBe(
      'Digest realm="r", nonce="n", algorithm=SHA-256, qop="auth", stale=true, opaque="xyz"',
    );
  });

  it('escapes quotes and backslashes inside quoted values (RFC 3261 §25.1 quoted-pair)', () => {
    expect(buildChallenge({ realm: 'a"b\\c', nonce: 'n', algorithm: 'MD5' })).toContain('realm="a\\"b\\\\c"');
  });

  it('refuses values with CR or LF, which would inject header lines', () => {
    expect(() => buildChallenge({ realm: 'r\r\nX-Evil: 1', nonce: 'n', algorithm: 'MD5' })).toThrow(RangeError);
    expect(() => buildChallenge({ realm: 'r', nonce: 'n', algorithm: 'MD5', opaque: 'o\n' })).toThrow(RangeError);
  });
});

describe('dummyHa1()', () => {
  it('has the shape of a real HA1 for each algorithm', () => {
    expect(dummyHa1('MD5', 'nobody', 'acme.sip.localhost')).toMatch(/^[0-9a-f]{32}$/);
    expect(dummyHa1('SHA-256', 'nobody', 'acme.sip.localhost')).toMatch(/^[0-9a-f]{64}$/);
  });

  it('is stable for one user within the process and differs between users and realms', () => {
    const a = dummyHa1('MD5', 'nobody', 'acme.sip.localhost');
    expect(dummyHa1('MD5', 'nobody', 'acme.sip.localhost')).toBe(a);
    expect(dummyHa1('MD5', 'somebody', 'acme.sip.localhost')).not.toBe(a);
    expect(dummyHa1('MD5', 'nobody', 'other.sip.localhost')).not.toBe(a);
  });

  it('is not the HA1 of an empty or username-equal password', () => {
    for (const pw of ['', 'nobody', 'password']) {
      expect(dummyHa1('SHA-256', 'nobody', 'r')).not.toBe(computeHa1('SHA-256', 'nobody', 'r', pw));
    }
  });

  it('runs through verifyDigest like a real HA1 and answers bad-response', () => {
    for (const algorithm of ['MD5', 'SHA-256'] as const) {
      const ha1 = dummyHa1(algorithm, RFC7616.username, RFC7616.realm);
      expect(verifyDigest(rfc7616Creds(algorithm), { method: 'GET', ha1, algorithm })).toBe('bad-response');
    }
  });
});

describe('answerChallenge (the edge as a client of a carrier)', () => {
  it('answers MD5 and SHA-256 challenges with qop=auth so that the server verifies them', async () => {
    const { answerChallenge, computeHa1, verifyDigest } = await import('../../../src/auth/digest.js');
    const { parseDigestCredentials } = await import('../../../src/sip/headers.js');
    for (const algorithm of ['MD5', 'SHA-256'] as const) {
      const challenge = parseDigestCredentials(`Digest realm="carrier.example", nonce="abc123", qop="auth,auth-int", algorithm=${algorithm}, opaque="op"`)!;
      const value = answerChallenge({ challenge: challenge.params, method: 'INVITE', uri: 'sip:+918012345678@127.0.0.8', username: 'trunk1', password: 's3cret' })!;
      const creds = parseDigestCredentials(value)!;
      expect(creds.params.get('opaque')).toBe('op');
      expect(creds.params.get('qop')).toBe('auth');
      expect(verifyDigest(creds, { method: 'INVITE', algorithm, ha1: computeHa1(algorithm, 'trunk1', 'carrier.example', 's3cret') })).toBe('ok');
      expect(verifyDigest(creds, { method: 'INVITE', algorithm, ha1: computeHa1(algorithm, 'trunk1', 'carrier.example', 'wrong') })).toBe('bad-response');
    }
  });

  it('answers an RFC 2069 challenge (no qop) and refuses what it cannot answer', async () => {
    const { answerChallenge, computeHa1, verifyDigest } = await import('../../../src/auth/digest.js');
    const { parseDigestCredentials } = await import('../../../src/sip/headers.js');
    const plain = parseDigestCredentials('Digest realm="r", nonce="n"')!;
    const creds = parseDigestCredentials(answerChallenge({ challenge: plain.params, method: 'INVITE', uri: 'sip:x@y', username: 'u', password: 'p' })!)!;
    expect(creds.params.has('qop')).toBe(false);
    expect(verifyDigest(creds, { method: 'INVITE', algorithm: 'MD5', ha1: computeHa1('MD5', 'u', 'r', 'p') })).toBe('ok');
    for (const c of ['Digest realm="r", nonce="n", algorithm=MD5-sess', 'Digest realm="r", nonce="n", qop="auth-int"', 'Digest realm="r"']) {
      expect(answerChallenge({ challenge: parseDigestCredentials(c)!.params, method: 'INVITE', uri: 'sip:x@y', username: 'u', password: 'p' })).toBeNull();
    }
  });
});
