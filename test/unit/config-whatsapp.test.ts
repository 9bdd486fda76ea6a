/** The WhatsApp settings (docs/messaging.md "Settings"): WHATSAPP_API_BASE_URL, WHATSAPP_APP_SECRET, WHATSAPP_VERIFY_TOKEN. */
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

describe('WhatsApp settings', () => {
  it("Meta's Graph API with its version by default; secrets unset; set values kept (a trailing slash dropped)", () => {
    const d = loadConfig({}, { configFile: null });
    expect(d.whatsappApiBaseUrl).toBe('https://graph.facebook.com/v21.0');
    expect(d.whatsappAppSecret).toBe(null);
    expect(d.whatsappVerifyToken).toBe(null);
    const c = loadConfig({ WHATSAPP_API_BASE_URL: 'http://127.0.0.1:9999/v21.0/', WHATSAPP_APP_SECRET: '0123456789abcdef0123', WHATSAPP_VERIFY_TOKEN: 'verify-me-please' }, { configFile: null });
    expect(c.whatsappApiBaseUrl).toBe('http://127.0.0.1:9999/v21.0');
    expect(c.whatsappAppSecret).toBe('0123456789abcdef0123');
    expect(c.whatsappVerifyToken).toBe('verify-me-please');
  });

  it('refuses a base URL that is not http(s) and short secrets, without echoing them', () => {
    expect(refused({ WHATSAPP_API_BASE_URL: 'ftp://graph.example' })).toMatch(/^WHATSAPP_API_BASE_URL must be an http\(s\) URL/);
    const short = refused({ WHATSAPP_APP_SECRET: 'tiny-secret' });
    expect(short).toBe('WHATSAPP_APP_SECRET must be at least 16 characters');
    expect(refused({ WHATSAPP_VERIFY_TOKEN: 'abc' })).toBe('WHATSAPP_VERIFY_TOKEN must be at least 8 characters');
  });
});
