/**
 * A local KYC verification provider for the tests (docs/kyc.md "Providers"): speaks the
 * HTTP protocol of src/kyc/provider.ts on 127.0.0.1, refuses a wrong
 * `Authorization: Bearer <secret>` (401) and a body without `sub_account_id` or the
 * operation's field (422), and answers by the value checked:
 *
 * - a value ending in `F` (PAN) / `V` (GSTIN) / CIN `L…` → verified; others → failed;
 * - `SLOW…` or any value while {@link KycProviderStub.delayMs} is set → answers late (timeout);
 * - while {@link KycProviderStub.failWith} is set → that HTTP status.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StubCall {
  op: string;
  authorized: boolean;
  body: Record<string, unknown>;
}

export interface KycProviderStub {
  url: string;
  secret: string;
  calls: StubCall[];
  delayMs: number;
  failWith: number | null;
  close(): Promise<void>;
}

const FIELDS: Record<string, string[]> = {
  'verify-pan': ['pan'],
  'verify-gst': ['gstin'],
  'cin/search': ['company_name'],
  'cin/confirm': ['company_name', 'cin'],
  'digilocker/initiate': ['redirect_url'],
  'digilocker/verify': ['access_request_id'],
};

export async function startKycProviderStub(secret = 'stub-provider-secret-0123456789'): Promise<KycProviderStub> {
  const stub: KycProviderStub = { url: '', secret, calls: [], delayMs: 0, failWith: null, close: async () => {} };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const op = (req.url ?? '').replace(/^\/v1\//, '');
      let body: Record<string, unknown> = {};
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      } catch {
        body = {};
      }
      const authorized = req.headers.authorization === `Bearer ${secret}`;
      stub.calls.push({ op, authorized, body });
      const send = (status: number, o: unknown): void => {
        const t = JSON.stringify(o);
        res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(t) });
        res.end(t);
      };
      if (req.method !== 'POST' || !FIELDS[op]) return send(404, { error: 'no such operation' });
      if (!authorized) return send(401, { error: 'bad secret' });
      const fields = FIELDS[op] ?? [];
      if (typeof body.sub_account_id !== 'string' || fields.some((f) => typeof body[f] !== 'string')) return send(422, { error: 'bad body' });
      const answer = (): void => {
        if (stub.failWith !== null) return send(stub.failWith, { error: 'provider down' });
        if (op === 'cin/search') return send(200, { matches: [{ cin: 'L17110MH1973PLC019786', company_name: String(body.company_name).toUpperCase() }] });
        if (op === 'digilocker/initiate') return send(200, { authorization_url: 'https://digilocker.stub.invalid/auth?ar=AR-STUB-1', access_request_id: 'AR-STUB-1' });
        const v = String(body[fields[fields.length - 1] ?? ''] ?? '');
        const ok = op === 'verify-pan' ? v.endsWith('F') : op === 'verify-gst' ? v.endsWith('V') : op === 'cin/confirm' ? v.startsWith('L') : v === 'AR-STUB-1';
        return send(200, { status: ok ? 'verified' : 'failed', reference: `ref-${stub.calls.length}` });
      };
      const slow = Object.values(body).some((x) => typeof x === 'string' && x.startsWith('SLOW'));
      if (stub.delayMs > 0 || slow) setTimeout(answer, stub.delayMs || 10_000).unref();
      else answer();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as AddressInfo).port;
  stub.url = `http://127.0.0.1:${port}/v1`;
  stub.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return stub;
}
