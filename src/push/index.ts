/**
 * Push at start (docs/push.md "Operator"): the APNs and FCM clients from their settings.
 * A key file that is named but missing, unreadable or not a key stops the start with one
 * line; neither set = push off (reported at start by the caller).
 */
import { readFileSync } from 'node:fs';
import { createPrivateKey } from 'node:crypto';
import type { Registry } from 'prom-client';
import { ConfigError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { LocationStore } from '../store/location/location.js';
import { ApnsClient } from './apns.js';
import { FcmClient, parseServiceAccount, type ServiceAccount } from './fcm.js';
import type { PushProvider } from './params.js';
import { PushService, type PushNotices } from './service.js';
import type { PushSender } from './types.js';

export interface PushSettings {
  apnsUrl: string;
  apnsKeyFile: string | null;
  apnsKeyId: string | null;
  apnsTeamId: string | null;
  fcmUrl: string;
  fcmServiceAccountFile: string | null;
  pushWait: number;
}

function read(file: string, name: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(`${name}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? 'error'})`);
  }
}

/** The keys of the configured providers, read and checked. Throws ConfigError naming the setting. */
export function loadPushKeys(s: PushSettings): { apnsPem: string | null; account: ServiceAccount | null } {
  let apnsPem: string | null = null;
  let account: ServiceAccount | null = null;
  if (s.apnsKeyFile) {
    if (!s.apnsKeyId || !s.apnsTeamId) throw new ConfigError('APNS_KEY_FILE needs APNS_KEY_ID and APNS_TEAM_ID');
    const pem = read(s.apnsKeyFile, 'APNS_KEY_FILE');
    try {
      if (createPrivateKey(pem).asymmetricKeyType !== 'ec') throw new Error('not an EC key');
    } catch {
      throw new ConfigError(`APNS_KEY_FILE: ${s.apnsKeyFile} is not a .p8 (PKCS #8 EC P-256) key`);
    }
    apnsPem = pem;
  }
  if (s.fcmServiceAccountFile) {
    const text = read(s.fcmServiceAccountFile, 'FCM_SERVICE_ACCOUNT_FILE');
    try {
      account = parseServiceAccount(text);
      createPrivateKey(account.private_key);
    } catch (err) {
      throw new ConfigError(`FCM_SERVICE_ACCOUNT_FILE: ${s.fcmServiceAccountFile} is not a service account key (${err instanceof Error ? err.message : 'bad'})`);
    }
  }
  return { apnsPem, account };
}

/** The push service, or null when no provider is configured. Throws ConfigError for a bad key file. */
export function createPush(s: PushSettings, deps: { location: LocationStore; log: Logger; registry?: Registry; notices?: PushNotices | null }): PushService | null {
  const senders: Partial<Record<PushProvider, PushSender>> = {};
  const { apnsPem, account } = loadPushKeys(s);
  if (apnsPem) senders.apns = new ApnsClient({ url: s.apnsUrl, keyPem: apnsPem, keyId: s.apnsKeyId as string, teamId: s.apnsTeamId as string });
  if (account) senders.fcm = new FcmClient({ url: s.fcmUrl, account });
  if (!senders.apns && !senders.fcm) return null;
  return new PushService({ senders, waitMs: s.pushWait * 1000, ...deps });
}
