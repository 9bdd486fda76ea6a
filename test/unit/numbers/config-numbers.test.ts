/** The numbers settings: NUMBER_INVENTORY_FILE (a bad line stops the start) and NUMBER_RENTAL_SWEEP_INTERVAL. */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../../src/config.js';
import { ConfigError } from '../../../src/errors.js';
import { Ledger } from '../../../src/billing/ledger.js';
import { MemoryBillingStore } from '../../../src/store/billing/memory.js';
import { MemoryDirectory } from '../../../src/store/directory/memory.js';
import { createNumbers } from '../../../src/numbers/index.js';

const ledger = new Ledger({ store: new MemoryBillingStore(), partners: [], defaultCurrency: 'USD' });

describe('numbers settings', () => {
  it('defaults: no file (development: the sample), a sweep every 300 s; 0 turns the sweep off; nonsense is refused', () => {
    const dev = loadConfig({}, { configFile: null });
    expect(dev.numberInventoryFile).toBe(null);
    expect(dev.numberRentalSweepInterval).toBe(300);
    expect(loadConfig({ NUMBER_RENTAL_SWEEP_INTERVAL: '0' }, { configFile: null }).numberRentalSweepInterval).toBe(0);
    expect(loadConfig({ NUMBER_RENTAL_SWEEP_INTERVAL: '60' }, { configFile: null }).numberRentalSweepInterval).toBe(60);
    expect(() => loadConfig({ NUMBER_RENTAL_SWEEP_INTERVAL: 'hourly' }, { configFile: null })).toThrow(ConfigError);
    expect(() => loadConfig({ NUMBER_RENTAL_SWEEP_INTERVAL: '-5' }, { configFile: null })).toThrow(/NUMBER_RENTAL_SWEEP_INTERVAL/);
  });

  it('NUMBER_INVENTORY_FILE: a bad line stops the build (ConfigError naming the file and line); a good file loads', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cfg-numbers-'));
    const file = join(dir, 'numbers.csv');
    writeFileSync(file, 'e164,country,region,number_type,setup_fee,monthly_fee,currency,provider\n+918040001001,IN,,landline,1,2,USD,p\n+918040001002,IN,,landline,1,2.5.0,USD,p\n');
    const config = loadConfig({ NUMBER_INVENTORY_FILE: file }, { configFile: null });
    expect(config.numberInventoryFile).toBe(file);
    expect(() => createNumbers({ config, redis: null, ledger, directory: new MemoryDirectory() })).toThrow(`NUMBER_INVENTORY_FILE ${file}: line 3: monthly_fee "2.5.0"`);
    writeFileSync(file, 'e164,country,region,number_type,setup_fee,monthly_fee,currency,provider\n+918040001001,IN,,landline,1,2,USD,p\n');
    const n = createNumbers({ config: { ...config, numberRentalSweepInterval: 0 }, redis: null, ledger, directory: new MemoryDirectory() });
    await n.start();
    expect((await n.listInventory({}, { limit: 10, offset: 0 })).items.map((r) => r.e164)).toEqual(['+918040001001']);
    n.stop();
  });
});
