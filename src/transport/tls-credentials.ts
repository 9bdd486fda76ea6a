import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from '../logger.js';
import { ConfigError } from '../errors.js';

export interface TlsCredentials {
  key: Buffer;
  cert: Buffer;
  selfSigned: boolean;
}

/**
 * The certificate for TLS and WSS: the operator's files, or — for development —
 * a self-signed one made with openssl once and kept in the temp directory.
 */
export function loadTlsCredentials(certFile: string | null, keyFile: string | null, log: Logger): TlsCredentials {
  if (certFile || keyFile) {
    if (!certFile || !keyFile) throw new ConfigError('TLS_CERT_FILE and TLS_KEY_FILE must be set together');
    try {
      return { cert: readFileSync(certFile), key: readFileSync(keyFile), selfSigned: false };
    } catch (e) {
      throw new ConfigError(`cannot read TLS files: ${(e as Error).message}`);
    }
  }
  const dir = join(tmpdir(), 'sip-edge-dev-cert');
  // Key and certificate in one PEM, renamed into place, so concurrent starts never read a mismatched pair.
  const pem = join(dir, 'dev.pem');
  if (!existsSync(pem)) {
    const key = `${pem}.${process.pid}.key`;
    const cert = `${pem}.${process.pid}.crt`;
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    try {
      execFileSync(
        'openssl',
        [
          'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes',
          '-days', '825', '-subj', '/CN=sip-edge development',
          '-addext', 'subjectAltName=DNS:localhost,DNS:*.sip.localhost,DNS:sip.localhost,IP:127.0.0.1,IP:::1',
          '-keyout', key, '-out', cert,
        ],
        { stdio: 'ignore' },
      );
      writeFileSync(`${pem}.${process.pid}`, Buffer.concat([readFileSync(key), readFileSync(cert)]), { mode: 0o600 });
      renameSync(`${pem}.${process.pid}`, pem);
      rmSync(key, { force: true });
      rmSync(cert, { force: true });
    } catch (e) {
      throw new ConfigError(`no TLS_CERT_FILE/TLS_KEY_FILE and openssl could not make a development certificate: ${(e as Error).message}`);
    }
  }
  log.warn({ file: pem }, 'TLS_CERT_FILE/TLS_KEY_FILE not set: using a self-signed development certificate');
  const both = readFileSync(pem);
  return { cert: both, key: both, selfSigned: true };
}
