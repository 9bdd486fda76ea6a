/**
 * The answer_url document README "Placing calls" shows is one the runtime takes: read from
 * the README itself, parsed, and its verbs are the ones the IVR test runs on the wire
 * (test/integration/calls-placed.test.ts).
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseAppDocument } from '../../../src/voicexml/document.js';

const README = resolve(dirname(fileURLToPath(import.meta.url)), '../../../README.md');

describe('README "Placing calls"', () => {
  it('its answer_url XML has six lines and parses to Speak, Play, Gather (with a Speak prompt), Hangup', () => {
    const text = readFileSync(README, 'utf8');
    const section = text.slice(text.indexOf('### Placing calls'));
    const m = /```xml\n([\s\S]*?)```/.exec(section);
    expect(m).not.toBeNull();
    const xml = (m as RegExpExecArray)[1] as string;
    expect(xml.trim().split('\n')).toHaveLength(6);
    const doc = parseAppDocument(xml);
    expect(doc.ok, doc.ok ? '' : doc.reason).toBe(true);
    if (!doc.ok) return;
    expect(doc.verbs.map((v) => v.verb)).toEqual(['Speak', 'Play', 'Gather', 'Hangup']);
    const gather = doc.verbs[2] as { verb: 'Gather'; numDigits: number; action: { url: string } | null; prompts: Array<{ verb: string }> };
    expect(gather.numDigits).toBe(1);
    expect(gather.action?.url).toBe('https://app.example/menu');
    expect(gather.prompts.map((p) => p.verb)).toEqual(['Speak']);
  });
});
