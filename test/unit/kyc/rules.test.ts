/**
 * The KYC rule (docs/kyc.md "The rule"): what a business_type needs, overall_status,
 * kyc_calls_blocked; PAN, GSTIN (check character) and CIN formats; masking to the last 4.
 */
import { describe, expect, it } from 'vitest';
import { callsBlocked, overallStatus, requirementsFor } from '../../../src/kyc/rules.js';
import { cinProblem, gstinCheckChar, gstinProblem, panProblem } from '../../../src/kyc/validate.js';
import { maskValue } from '../../../src/store/kyc/kyc.js';

describe('KYC rule', () => {
  it('individuals, proprietorships, HUFs (and an empty or unknown type) need PAN and Aadhaar; companies PAN and GST or CIN', () => {
    for (const t of ['individual', 'proprietorship', 'sole_proprietorship', 'HUF', '', 'something_else']) expect(requirementsFor(t), t).toEqual([['pan'], ['aadhaar']]);
    for (const t of ['private_limited', 'Public Limited', 'llp', 'opc', 'partnership', 'trust', 'society', 'company']) expect(requirementsFor(t), t).toEqual([['pan'], ['gst', 'cin']]);
  });

  it('overall_status of an individual', () => {
    expect(overallStatus('individual', {})).toBe('not_started');
    expect(overallStatus('individual', { pan: 'verified' })).toBe('pending');
    expect(overallStatus('individual', { pan: 'verified', aadhaar: 'pending' })).toBe('pending');
    expect(overallStatus('individual', { pan: 'verified', aadhaar: 'failed' })).toBe('failed');
    expect(overallStatus('individual', { pan: 'failed' })).toBe('failed');
    expect(overallStatus('individual', { pan: 'verified', aadhaar: 'verified' })).toBe('verified');
    // GST does not stand in for Aadhaar.
    expect(overallStatus('individual', { pan: 'verified', gst: 'verified', cin: 'verified' })).toBe('pending');
  });

  it('overall_status of a company: GST or CIN', () => {
    expect(overallStatus('private_limited', { pan: 'verified', gst: 'verified' })).toBe('verified');
    expect(overallStatus('private_limited', { pan: 'verified', cin: 'verified' })).toBe('verified');
    expect(overallStatus('private_limited', { pan: 'verified', gst: 'failed', cin: 'verified' })).toBe('verified');
    expect(overallStatus('private_limited', { pan: 'verified', gst: 'failed' })).toBe('failed');
    expect(overallStatus('private_limited', { pan: 'pending', gst: 'verified' })).toBe('pending');
    expect(overallStatus('private_limited', { gst: 'verified', cin: 'verified' })).toBe('pending');
    expect(overallStatus('private_limited', { aadhaar: 'verified' })).toBe('not_started');
  });

  it('blocks customer_use until verified; never personal_use', () => {
    for (const o of ['not_started', 'pending', 'failed'] as const) {
      expect(callsBlocked('customer_use', o)).toBe(true);
      expect(callsBlocked('personal_use', o)).toBe(false);
    }
    expect(callsBlocked('customer_use', 'verified')).toBe(false);
  });
});

describe('KYC input formats', () => {
  it('PAN: exactly 10 characters, the pattern', () => {
    expect(panProblem('ABCPE1234F')).toBeNull();
    expect(panProblem('AAACR5055K')).toBeNull();
    expect(panProblem('ABCPE1234')).toMatch(/exactly 10/);
    expect(panProblem('ABCPE1234FF')).toMatch(/exactly 10/);
    expect(panProblem('abcpe1234f')).toMatch(/PAN/);
    expect(panProblem('ABCXE1234F')).toMatch(/PAN/); // 4th letter is not a holder category
    expect(panProblem('ABCPE12345')).toMatch(/PAN/);
    expect(panProblem('1BCPE1234F')).toMatch(/PAN/);
  });

  it('GSTIN: 15 characters, the pattern, the check character', () => {
    expect(gstinCheckChar('27AAPFU0939F1Z')).toBe('V');
    expect(gstinProblem('27AAPFU0939F1ZV')).toBeNull();
    expect(gstinProblem('29AAGCB7383J1Z4')).toBeNull();
    expect(gstinProblem('27AAPFU0939F1ZW')).toMatch(/check character/);
    expect(gstinProblem('27AAPFU0939F1Z')).toMatch(/exactly 15/);
    expect(gstinProblem('27AAPFU0939F1YV')).toMatch(/GSTIN/); // 14th must be Z
    expect(gstinProblem('2XAAPFU0939F1ZV')).toMatch(/GSTIN/);
    // Every single-character change of a valid GSTIN's body changes its check character.
    const body = '27AAPFU0939F1Z';
    const changed = [...body].map((ch, i) => body.slice(0, i) + (ch === '1' ? '2' : ch === 'A' ? 'B' : ch === 'Z' ? 'Y' : ch === '9' ? '8' : ch === '0' ? '1' : ch === 'P' ? 'Q' : ch === 'F' ? 'G' : ch === 'U' ? 'V' : ch === '7' ? '6' : ch === '2' ? '3' : ch === '3' ? '4' : 'A') + body.slice(i + 1));
    for (const c of changed) expect(gstinCheckChar(c), c).not.toBe('V');
  });

  it('CIN: 21 characters, the pattern', () => {
    expect(cinProblem('U72900KA2024PTC123456')).toBeNull();
    expect(cinProblem('L17110MH1973PLC019786')).toBeNull();
    expect(cinProblem('U72900KA2024PTC12345')).toMatch(/exactly 21/);
    expect(cinProblem('X72900KA2024PTC123456')).toMatch(/CIN/);
  });

  it('masks to the last 4 characters', () => {
    expect(maskValue('ABCPE1234F')).toBe('******234F');
    expect(maskValue('27AAPFU0939F1ZV')).toBe('***********F1ZV');
    expect(maskValue('123456789012')).toBe('********9012');
    expect(maskValue('abc')).toBe('***');
  });
});
