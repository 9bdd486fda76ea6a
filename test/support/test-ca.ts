/**
 * A throw-away certificate authority and a server certificate it signed, made with
 * openssl (as src/transport/tls-credentials.ts makes the development certificate):
 * for HTTPS receivers whose certificate only a client told to trust the CA accepts.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface TestCa {
  dir: string;
  /** PEM of the CA certificate, and its file (for NODE_EXTRA_CA_CERTS). */
  caCert: string;
  caCertFile: string;
  /** Key and certificate of a server named localhost, 127.0.0.1 and ::1, signed by the CA. */
  serverKey: string;
  serverCert: string;
  serverKeyFile: string;
  serverCertFile: string;
  remove(): void;
}

const EC = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];

export function makeTestCa(): TestCa {
  const dir = mkdtempSync(join(tmpdir(), 'sip-edge-test-ca-'));
  const f = (n: string): string => join(dir, n);
  const run = (args: string[]): void => void execFileSync('openssl', args, { stdio: 'pipe' });
  run(['req', '-x509', ...EC, '-days', '2', '-subj', '/CN=sip-edge test CA', '-keyout', f('ca.key'), '-out', f('ca.crt'),
    '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign']);
  run(['req', ...EC, '-subj', '/CN=localhost', '-keyout', f('server.key'), '-out', f('server.csr')]);
  writeFileSync(f('server.ext'), 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n');
  run(['x509', '-req', '-in', f('server.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2',
    '-extfile', f('server.ext'), '-out', f('server.crt')]);
  return {
    dir,
    caCert: readFileSync(f('ca.crt'), 'utf8'),
    caCertFile: f('ca.crt'),
    serverKey: readFileSync(f('server.key'), 'utf8'),
    serverCert: readFileSync(f('server.crt'), 'utf8'),
    serverKeyFile: f('server.key'),
    serverCertFile: f('server.crt'),
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
