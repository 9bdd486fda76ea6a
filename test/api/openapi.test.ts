/**
 * docs/openapi.yaml describes exactly the routes the server registers, and its
 * internal references resolve.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startHarness, testConfig, type Harness } from '../support/api-harness.js';
import { createMessagingCatalog } from '../../src/messaging/catalog/index.js';
import { createLogger } from '../../src/logger.js';

const YAML = readFileSync(fileURLToPath(new URL('../../docs/openapi.yaml', import.meta.url)), 'utf8');

/** `METHOD path` of every operation under `paths:` (the document keeps a two-space indent). */
function documentedOperations(yaml: string): string[] {
  const out: string[] = [];
  let section = '';
  let path = '';
  for (const line of yaml.split('\n')) {
    const top = /^(\w+):/.exec(line);
    if (top) {
      section = top[1] ?? '';
      continue;
    }
    if (section !== 'paths') continue;
    const p = /^ {2}(\/\S*):\s*$/.exec(line);
    if (p) {
      path = p[1] ?? '';
      continue;
    }
    const m = /^ {4}(get|put|post|delete|patch|head|options):\s*$/.exec(line);
    if (m && path) out.push(`${(m[1] ?? '').toUpperCase()} ${path}`);
  }
  return out.sort();
}

/** Names defined under components.<kind>. */
function components(yaml: string): Set<string> {
  const out = new Set<string>();
  let inComponents = false;
  let kind = '';
  for (const line of yaml.split('\n')) {
    const top = /^(\w+):/.exec(line);
    if (top) {
      inComponents = top[1] === 'components';
      continue;
    }
    if (!inComponents) continue;
    const k = /^ {2}(\w+):\s*$/.exec(line);
    if (k) {
      kind = k[1] ?? '';
      continue;
    }
    const name = /^ {4}([\w-]+):/.exec(line);
    if (name && kind) out.add(`#/components/${kind}/${name[1] ?? ''}`);
  }
  return out;
}

describe('docs/openapi.yaml', () => {
  let h: Harness;
  beforeAll(async () => {
    // With an operator token: without one, the admin routes answer 404 exactly like a route that does not exist.
    // With a messaging catalog: its routes are registered only when the server is given one.
    const messagingCatalog = createMessagingCatalog({
      config: testConfig(),
      redis: null,
      log: createLogger('silent'),
      channels: { whatsapp: async () => null },
      sender: { send: async () => ({ id: 'm', status: 'pending' }) },
    });
    h = await startHarness('memory', { adminAuthToken: 'openapi-test-admin-token-0123' }, { messagingCatalog });
  });
  afterAll(async () => {
    await h.close();
  });

  it('documents every route the server registers, and no other', () => {
    const served = h.app.apiRoutes.map((r) => `${r.method} ${r.url.replace(/:(\w+)/g, '{$1}')}`).sort();
    expect(served.length).toBeGreaterThan(0);
    expect(documentedOperations(YAML)).toEqual(served);
  });

  it('every $ref names a defined component', () => {
    const defined = components(YAML);
    const refs = [...YAML.matchAll(/\$ref:\s*"([^"]+)"/g)].map((m) => m[1] ?? '');
    expect(refs.length).toBeGreaterThan(0);
    for (const r of refs) expect(defined, r).toContain(r);
  });

  it('documents every Endpoint list filter of the spec', () => {
    const list = YAML.slice(YAML.indexOf('  /api/v1/Account/{auth_id}/Endpoint/:'), YAML.indexOf('  /api/v1/Account/{auth_id}/Endpoint/{endpoint_id}/:'));
    for (const name of [
      'username__contains',
      'username__exact',
      'username__startswith',
      'alias__contains',
      'alias__exact',
      'application_id__exact',
      'application_id__isnull',
      'sub_account',
    ]) {
      expect(list).toContain(`name: ${name},`);
    }
    expect(list).toContain('$ref: "#/components/parameters/Limit"');
    expect(list).toContain('$ref: "#/components/parameters/Offset"');
  });

  it('every documented route answers something other than 404-no-route', async () => {
    for (const op of documentedOperations(YAML)) {
      const [method = 'GET', path = '/'] = op.split(' ');
      const url = path.replace(/\{(\w+)\}/g, 'X');
      const r = await h.request(method, url, method === 'POST' ? { body: {} } : {});
      expect(r.text, op).not.toMatch(/No route /);
    }
  });
});
