/**
 * Text for voters (contract, fifth part): `{{name_local}}` and `{{first_name_local}}` render the roll's own-script
 * name (else the name); `{{ward}}`, `{{booth}}` and `{{constituency}}` render the matching place's name, not the
 * roll's spelling. A Hindi template read "नमस्ते Shanti जी … WARD 12" before.
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { buildTestApp, call, dialects, register, type TestApp, uniquePhone } from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

for (const dialect of dialects) {
  describe(`text for voters in their script, places by name (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, database.env);
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('a Hindi template renders the own-script name and the ward by its place name', async () => {
      const owner = await register(t.app);
      const api = (method: string, url: string, body?: unknown) =>
        call(t.app, method as 'GET', url, { token: owner.token, ...(body !== undefined ? { body } : {}) });
      const place = await api('POST', '/api/places', {
        kind: 'ward',
        name: 'लंका वार्ड 12',
        aliases: ['Ward 12'],
      });
      expect(place.status, place.raw).toBe(201);
      const [shanti, ravi] = [uniquePhone(), uniquePhone()];
      await api('POST', '/api/voters', {
        name: 'Shanti Devi',
        name_local: 'शांति देवी',
        phone: shanti,
        ward: 'WARD 12',
      });
      // No own-script name, and a ward the workspace keeps no place for: the name and the roll's spelling.
      await api('POST', '/api/voters', { name: 'Ravi Kumar', phone: ravi, ward: 'Ward 40' });
      const template = await api('POST', '/api/templates', {
        name: 'Namaste',
        channel: 'sms',
        language: 'hi',
        body: 'नमस्ते {{first_name_local}} जी, {{ward}} की नाली कल साफ होगी। - {{name_local}}',
      });
      expect(template.status, template.raw).toBe(201);
      const sent = await api('POST', '/api/messages/broadcast', {
        channel: 'sms',
        template_id: template.body.data.id,
        recipients: [shanti, ravi],
      });
      expect(sent.status, sent.raw).toBe(202);
      await new DeliveryWorker({
        db: t.db,
        config: t.config,
        providers: t.providers,
        log: pino({ level: 'silent' }),
      }).drain();
      const body = async (to: string) =>
        (await api('GET', `/api/messages/history?to=${encodeURIComponent(to)}`)).body.data.data[0].message;
      expect(await body(shanti)).toBe('नमस्ते शांति जी, लंका वार्ड 12 की नाली कल साफ होगी। - शांति देवी');
      expect(await body(ravi)).toBe('नमस्ते Ravi जी, Ward 40 की नाली कल साफ होगी। - Ravi Kumar');
    });
  });
}
