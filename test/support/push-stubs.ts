/**
 * Local stand-ins for the push services (test/integration/push.test.ts): an APNs provider
 * API (HTTP/2 over TLS) that checks the provider token's ES256 signature with the test
 * public key, the topic and the push type; and FCM HTTP v1 with its own OAuth2 token
 * endpoint (the JWT bearer grant's RS256 assertion checked with the service account's
 * public key), taking only the access tokens it issued.
 */
import { generateKeyPairSync, randomBytes, type KeyObject } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer } from 'node:http2';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import type { TestCa } from './test-ca.js';

export interface ApnsPush {
  token: string;
  topic: string;
  pushType: string;
  /** The provider token verified (ES256 with the test key, kid and iss as configured). */
  jwtOk: boolean;
  body: Record<string, unknown>;
  at: number;
}

export interface ApnsStub {
  url: string;
  keyFile: string;
  keyId: string;
  teamId: string;
  pushes: ApnsPush[];
  /** Tokens answered 410 Unregistered. */
  dead: Set<string>;
  /** Tokens answered 503 once (then 200). */
  flaky: Set<string>;
  /** Resolves with the next push (or one already received beyond `seen`). */
  next(seen: number, timeoutMs?: number): Promise<ApnsPush>;
  close(): Promise<void>;
}

function waiter<T>(list: T[]) {
  const waiters: Array<() => void> = [];
  return {
    added() {
      for (const w of waiters.splice(0)) w();
    },
    next(seen: number, timeoutMs = 5000): Promise<T> {
      return new Promise((resolve, reject) => {
        const check = (): boolean => {
          if (list.length > seen) {
            resolve(list[seen] as T);
            return true;
          }
          return false;
        };
        if (check()) return;
        const t = setTimeout(() => reject(new Error(`no push within ${timeoutMs} ms`)), timeoutMs);
        const w = (): void => {
          if (check()) clearTimeout(t);
          else waiters.push(w);
        };
        waiters.push(w);
      });
    },
  };
}

export async function startApnsStub(ca: TestCa): Promise<ApnsStub> {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const keyFile = join(ca.dir, 'AuthKey_TESTKEY123.p8');
  writeFileSync(keyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }) as string);
  const keyId = 'TESTKEY123';
  const teamId = 'ABCDE12345';
  const pushes: ApnsPush[] = [];
  const dead = new Set<string>();
  const flaky = new Set<string>();
  const w = waiter(pushes);
  const server: Http2SecureServer = createSecureServer({ key: ca.serverKey, cert: ca.serverCert });
  server.on('stream', (stream, headers) => {
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', () => {
      void (async () => {
        const path = String(headers[':path']);
        const token = decodeURIComponent(path.replace(/^\/3\/device\//, ''));
        const auth = String(headers.authorization ?? '');
        const jwtOk = await verifyApnsJwt(auth.replace(/^bearer /, ''), publicKey, keyId, teamId);
        const push: ApnsPush = {
          token,
          topic: String(headers['apns-topic'] ?? ''),
          pushType: String(headers['apns-push-type'] ?? ''),
          jwtOk,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as Record<string, unknown>,
          at: Date.now(),
        };
        pushes.push(push);
        w.added();
        const reply = (status: number, reason?: string): void => {
          stream.respond({ ':status': status, 'content-type': 'application/json' });
          stream.end(reason ? JSON.stringify({ reason }) : '');
        };
        if (!path.startsWith('/3/device/') || headers[':method'] !== 'POST') reply(404, 'BadPath');
        else if (!jwtOk) reply(403, 'InvalidProviderToken');
        else if (!push.topic) reply(400, 'MissingTopic');
        else if (dead.has(token)) reply(410, 'Unregistered');
        else if (flaky.delete(token)) reply(503, 'ServiceUnavailable');
        else reply(200);
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `https://127.0.0.1:${port}`,
    keyFile,
    keyId,
    teamId,
    pushes,
    dead,
    flaky,
    next: (seen, ms) => w.next(seen, ms),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

async function verifyApnsJwt(jwt: string, key: KeyObject, keyId: string, teamId: string): Promise<boolean> {
  try {
    if (decodeProtectedHeader(jwt).kid !== keyId) return false;
    const { payload } = await jwtVerify(jwt, key, { algorithms: ['ES256'], issuer: teamId });
    return typeof payload.iat === 'number' && Math.abs(payload.iat - Date.now() / 1000) < 3600;
  } catch {
    return false;
  }
}

export interface FcmPush {
  project: string;
  token: string;
  data: Record<string, string>;
  /** The bearer token was one this stub's token endpoint issued. */
  bearerOk: boolean;
  at: number;
}

export interface FcmStub {
  url: string;
  serviceAccountFile: string;
  pushes: FcmPush[];
  /** Access tokens issued (each after a verified assertion). */
  issued: string[];
  dead: Set<string>;
  next(seen: number, timeoutMs?: number): Promise<FcmPush>;
  close(): Promise<void>;
}

export async function startFcmStub(ca: TestCa): Promise<FcmStub> {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const pushes: FcmPush[] = [];
  const issued: string[] = [];
  const dead = new Set<string>();
  const w = waiter(pushes);
  const email = 'sip-edge@test-project.iam.gserviceaccount.com';
  let tokenUri = '';
  const server: Server = createServer({ key: ca.serverKey, cert: ca.serverCert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const json = (status: number, o: unknown): void => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(o));
        };
        if (req.url === '/token' && req.method === 'POST') {
          const form = new URLSearchParams(text);
          if (form.get('grant_type') !== 'urn:ietf:params:oauth:grant-type:jwt-bearer') return json(400, { error: 'unsupported_grant_type' });
          try {
            const { payload } = await jwtVerify(form.get('assertion') ?? '', publicKey, { algorithms: ['RS256'], issuer: email, audience: tokenUri });
            if (payload.scope !== 'https://www.googleapis.com/auth/firebase.messaging') return json(400, { error: 'invalid_scope' });
          } catch {
            return json(400, { error: 'invalid_grant' });
          }
          const t = `ya29.${randomBytes(12).toString('hex')}`;
          issued.push(t);
          return json(200, { access_token: t, expires_in: 3599, token_type: 'Bearer' });
        }
        const m = /^\/v1\/projects\/([^/]+)\/messages:send$/.exec(req.url ?? '');
        if (!m || req.method !== 'POST') return json(404, { error: { status: 'NOT_FOUND' } });
        const bearer = String(req.headers.authorization ?? '').replace(/^Bearer /, '');
        const body = JSON.parse(text || '{}') as { message?: { token?: string; data?: Record<string, string> } };
        const push: FcmPush = { project: decodeURIComponent(m[1] as string), token: body.message?.token ?? '', data: body.message?.data ?? {}, bearerOk: issued.includes(bearer), at: Date.now() };
        pushes.push(push);
        w.added();
        if (!push.bearerOk) return json(401, { error: { status: 'UNAUTHENTICATED' } });
        if (dead.has(push.token)) {
          return json(404, { error: { code: 404, status: 'NOT_FOUND', details: [{ '@type': 'type.googleapis.com/google.firebase.fcm.v1.FcmError', errorCode: 'UNREGISTERED' }] } });
        }
        return json(200, { name: `projects/${push.project}/messages/${randomBytes(4).toString('hex')}` });
      })();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const port = (server.address() as AddressInfo).port;
  tokenUri = `https://127.0.0.1:${port}/token`;
  const serviceAccountFile = join(ca.dir, 'service-account.json');
  writeFileSync(
    serviceAccountFile,
    JSON.stringify({ type: 'service_account', project_id: 'test-project', client_email: email, private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }), token_uri: tokenUri }),
  );
  return {
    url: `https://127.0.0.1:${port}`,
    serviceAccountFile,
    pushes,
    issued,
    dead,
    next: (seen, ms) => w.next(seen, ms),
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
