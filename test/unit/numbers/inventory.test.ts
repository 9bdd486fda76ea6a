/**
 * The inventory file: fees as decimal text → minor units, every bad line refused with its
 * line number, the development sample, and a reload that never touches a sold number and
 * leaves the store as it was when the file is bad.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { Inventory, parseInventory, sampleInventory } from '../../../src/numbers/inventory.js';
import { memoryNumbersStore } from '../../../src/store/numbers/memory.js';

const HEADER = 'e164,country,region,number_type,setup_fee,monthly_fee,currency,provider';

describe('parseInventory', () => {
  it('reads the columns, normalises the number and keeps fees as integers of 1/100000', () => {
    const rows = parseInventory(`${HEADER}\n+91 80 4000 1001,in,Karnataka,landline,1.5,0.00001,inr,carrierA\n14155550101,US,,mobile,0,12,USD,\n`, 'f.csv');
    expect(rows).toEqual([
      { e164: '+918040001001', country: 'IN', region: 'Karnataka', numberType: 'landline', setupFee: 150_000, monthlyFee: 1, currency: 'INR', provider: 'carrierA' },
      { e164: '+14155550101', country: 'US', region: '', numberType: 'mobile', setupFee: 0, monthlyFee: 1_200_000, currency: 'USD', provider: '' },
    ]);
  });

  it('accepts columns in any order, blank lines and # comments', () => {
    const rows = parseInventory('provider,currency,monthly_fee,setup_fee,number_type,region,country,e164\n# a comment\n\np,USD,2,1,toll_free,,US,+18005550100\n', 'f.csv');
    expect(rows.map((r) => [r.e164, r.numberType, r.setupFee, r.monthlyFee])).toEqual([['+18005550100', 'toll_free', 100_000, 200_000]]);
  });

  const bad: Array<[string, string, RegExp]> = [
    ['a malformed number', '+9180,IN,,landline,1,1,USD,p', /line 2: e164 "\+9180" is not a valid E\.164 number/],
    ['letters for a number', 'abc,IN,,landline,1,1,USD,p', /line 2: e164 "abc"/],
    ['an unknown country code', '+918040001001,India,,landline,1,1,USD,p', /line 2: country "India"/],
    ['a country the number is not of', '+918040001001,US,,landline,1,1,USD,p', /line 2: country US does not match the number \+918040001001 \(IN\)/],
    ['an unknown number type', '+918040001001,IN,,satellite,1,1,USD,p', /line 2: number_type "satellite"/],
    ['a negative fee', '+918040001001,IN,,landline,-1,1,USD,p', /line 2: setup_fee "-1"/],
    ['six decimals', '+918040001001,IN,,landline,1,0.000001,USD,p', /line 2: monthly_fee "0.000001"/],
    ['an unknown currency', '+918040001001,IN,,landline,1,1,XYZ,p', /line 2: currency "XYZ"/],
  ];
  it.each(bad)('refuses %s, naming the line', (_what, line, re) => {
    expect(() => parseInventory(`${HEADER}\n${line}\n`, 'f.csv')).toThrow(re);
    expect(() => parseInventory(`${HEADER}\n${line}\n`, 'f.csv')).toThrow(ConfigError);
  });

  it('refuses a number listed twice (naming both lines), a missing column and a ragged line', () => {
    const l = '+918040001001,IN,,landline,1,1,USD,p';
    expect(() => parseInventory(`${HEADER}\n${l}\n+14155550101,US,,mobile,1,1,USD,p\n+91-80-4000-1001,IN,,landline,1,1,USD,p\n`, 'f.csv')).toThrow(/line 4: \+918040001001 is already on line 2/);
    expect(() => parseInventory('e164,country,region,number_type,setup_fee,currency,provider\n+918040001001,IN,,landline,1,USD,p\n', 'f.csv')).toThrow(/line 1: the header lacks monthly_fee/);
    expect(() => parseInventory(`${HEADER}\n${l}\n+14155550101,US,mobile\n`, 'f.csv')).toThrow(/NUMBER_INVENTORY_FILE f\.csv: .*line 3/);
  });

  it('the development sample parses, priced in the currency given', () => {
    const rows = parseInventory(sampleInventory('EUR'), 'sample');
    expect(rows.length).toBeGreaterThanOrEqual(5);
    expect(rows.some((r) => r.e164.startsWith('+9180'))).toBe(true);
    expect(rows.some((r) => r.e164.startsWith('+1415'))).toBe(true);
    expect(new Set(rows.map((r) => r.currency))).toEqual(new Set(['EUR']));
  });
});

describe('Inventory (file, reload)', () => {
  it('upserts on load; a reload reprices unsold numbers only; a bad file throws and changes nothing', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'inv-'));
    const file = join(dir, 'numbers.csv');
    writeFileSync(file, `${HEADER}\n+918040001001,IN,,landline,1,2,USD,p\n+918040001002,IN,,landline,1,2,USD,p\n`);
    const store = memoryNumbersStore();
    const inv = new Inventory(store, file, null);
    expect(await inv.load()).toMatchObject({ added: 2, size: 2, source: file });
    const at = new Date().toISOString();
    expect((await store.claim('+918040001002', { token: 't', authId: 'MA1', deadline: Date.now() + 60_000, at }, Date.now())).ok).toBe(true);
    writeFileSync(file, `${HEADER}\n+918040001001,IN,,landline,1,3,USD,p\n+918040001002,IN,,landline,1,3,USD,p\n+918040001003,IN,,landline,1,3,USD,p\n`);
    expect(await inv.load()).toMatchObject({ added: 1, updated: 1, skippedSold: 1 });
    expect((await store.get('+918040001001'))?.monthlyFee).toBe(300_000);
    expect((await store.get('+918040001002'))?.monthlyFee).toBe(200_000);
    writeFileSync(file, `${HEADER}\n+918040001001,IN,,landline,1,9,USD,p\n+91x,IN,,landline,1,9,USD,p\n`);
    await expect(inv.load()).rejects.toThrow(/line 3/);
    expect((await store.get('+918040001001'))?.monthlyFee).toBe(300_000);
  });

  it('no file: the sample in development, nothing in production', () => {
    expect(new Inventory(memoryNumbersStore(), null, 'USD').read().rows.length).toBeGreaterThan(0);
    expect(new Inventory(memoryNumbersStore(), null, null).read().rows).toEqual([]);
  });
});
