/** The KYC provider settings: KYC_PROVIDER_URL + KYC_PROVIDER_SECRET (docs/kyc.md "Providers"). */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const refused = (env: Record<string, string>): string => {
  try {
    loadConfig(env, { configFile: null });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('accepted');
};

describe('KYC provider settings', () => {
  it('unset by default; both set are kept', () => {
    const d = loadConfig({}, { configFile: null });
    expect(d.kycProviderUrl).toBe(null);
    expect(d.kycProviderSecret).toBe(null);
    const c = loadConfig({ KYC_PROVIDER_URL: 'https://kyc.example.test/v1', KYC_PROVIDER_SECRET: 'provider-secret-0123456789' }, { configFile: null });
    expect(c.kycProviderUrl).toBe('https://kyc.example.test/v1');
    expect(c.kycProviderSecret).toBe('provider-secret-0123456789');
  });

  it('refuses a URL that is not http(s), a short secret (without echoing it) and one without the other', () => {
    expect(refused({ KYC_PROVIDER_URL: 'ftp://kyc.example.test', KYC_PROVIDER_SECRET: 'provider-secret-0123456789' })).toMatch(/^KYC_PROVIDER_URL must be an http\(s\) URL/);
    expect(refused({ KYC_PROVIDER_URL: 'not a url', KYC_PROVIDER_SECRET: 'provider-secret-0123456789' })).toMatch(/^KYC_PROVIDER_URL/);
    const short = refused({ KYC_PROVIDER_URL: 'https://kyc.example.test', KYC_PROVIDER_SECRET: 'short-one' });
    expect(short).toBe('KYC_PROVIDER_SECRET must be at least 16 characters');
    expect(refused({ KYC_PROVIDER_URL: 'https://kyc.example.test' })).toMatch(/go together/);
    expect(refused({ KYC_PROVIDER_SECRET: 'provider-secret-0123456789' })).toMatch(/go together/);
  });
});
