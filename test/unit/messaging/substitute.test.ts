import { describe, expect, it } from 'vitest';
import { substitute } from '../../../src/messaging/catalog/substitute.js';
import type { ContactRecord } from '../../../src/store/messaging-catalog/catalog.js';

const contact: ContactRecord = {
  id: 'c1',
  owner: 'A1',
  phone: '+14155550100',
  name: 'Ann',
  tags: [],
  attributes: { city: 'Oslo', 'order.no': '42' },
  createdAt: '',
  updatedAt: '',
};

describe('substitute()', () => {
  it('puts the contact’s name, phone, id and attributes into every string of the components, in order', () => {
    const r = substitute(
      [{ type: 'body', parameters: [{ type: 'text', text: 'Hi {{name}} in {{ city }}' }, { type: 'text', text: '{{attributes.order.no}}/{{phone}}/{{id}}' }] }],
      contact,
    );
    expect(r).toEqual({ ok: true, components: [{ type: 'body', parameters: [{ type: 'text', text: 'Hi Ann in Oslo' }, { type: 'text', text: '42/+14155550100/c1' }] }] });
  });

  it('leaves Meta’s positional placeholders and non-strings alone', () => {
    const r = substitute([{ type: 'body', text: 'Hello {{1}}', index: 0, flag: true, none: null }], contact);
    expect(r).toEqual({ ok: true, components: [{ type: 'body', text: 'Hello {{1}}', index: 0, flag: true, none: null }] });
  });

  it('names the first field the contact lacks (an empty name counts as missing)', () => {
    expect(substitute([{ text: '{{plan}} {{zip}}' }], contact)).toEqual({ ok: false, missing: 'plan' });
    expect(substitute([{ text: '{{name}}' }], { ...contact, name: '' })).toEqual({ ok: false, missing: 'name' });
  });

  it('does not read inherited properties as attributes', () => {
    expect(substitute([{ text: '{{toString}}' }], contact)).toEqual({ ok: false, missing: 'toString' });
  });
});
