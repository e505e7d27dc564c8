/**
 * The API document, exact (the contract's fifth part): what an independent fuzzer (Schemathesis) found, each a
 * regression test. Every method a path of the document does not take is 405 with `Allow` naming that path's own
 * methods, also where a `/{id}` path of the same prefix exists, and for a method the service knows nothing of;
 * a multipart upload finds its `file` part wherever it stands among the parts.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  buildTestApp,
  call,
  dialects,
  multipartBody,
  register,
  type TestApp,
  uniquePhone,
} from './helpers.ts';

const METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;

for (const dialect of dialects) {
  describe(`the API document, exact (${dialect})`, () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
    });
    afterAll(() => t?.close());

    it("every method a documented path does not take is 405, Allow naming the path's own methods", async () => {
      const owner = await register(t.app);
      const document = (await call(t.app, 'GET', '/api/openapi.json')).body as {
        paths: Record<string, Record<string, unknown>>;
      };
      const tried: string[] = [];
      for (const [path, operations] of Object.entries(document.paths)) {
        const own = METHODS.filter((m) => m.toLowerCase() in operations);
        const concrete = path.replace(/\{[^}]+\}/g, 'x_1');
        for (const method of [...METHODS.filter((m) => !own.includes(m)), 'QUERY']) {
          const res = await t.app.inject({
            method: method as 'GET',
            url: concrete,
            headers: { authorization: `Bearer ${owner.token}` },
          });
          tried.push(`${method} ${path}`);
          expect(res.statusCode, `${method} ${path}: ${res.body}`).toBe(405);
          expect(res.json()).toMatchObject({ success: false, error_code: 'method_not_allowed' });
          expect(res.headers.allow, `${method} ${path}`).toBe(own.join(', '));
        }
      }
      // Among them, the fixed paths a `/{id}` route of the same prefix used to catch.
      expect(tried).toEqual(expect.arrayContaining(['GET /api/messages/send', 'PUT /api/voters/export']));
    });

    it('the 409s that places, voter fields, surveys and survey runs answer are in the document', async () => {
      const owner = await register(t.app);
      const as = (method: string, url: string, body?: unknown) =>
        call(t.app, method, url, { token: owner.token, ...(body === undefined ? {} : { body }) });
      const answered: Array<[string, string, number]> = [];
      const conflict = async (method: string, route: string, url: string, body?: unknown) => {
        const res = await as(method, url, body);
        answered.push([method, route, res.status]);
        expect(res.status, `${method} ${url}: ${res.raw}`).toBe(409);
        expect(res.body.error_code).toBe('conflict');
      };
      expect((await as('POST', '/api/places', { kind: 'ward', name: 'Ward 1' })).status).toBe(201);
      const two = (await as('POST', '/api/places', { kind: 'ward', name: 'Ward 2' })).body.data;
      await conflict('POST', '/api/places', '/api/places', { kind: 'ward', name: 'ward 1' });
      await conflict('PATCH', '/api/places/{id}', `/api/places/${two.id}`, { name: 'Ward 1' });
      expect(
        (await as('POST', '/api/voter-fields', { key: 'caste', label: 'Caste', type: 'text' })).status,
      ).toBe(201);
      await conflict('POST', '/api/voter-fields', '/api/voter-fields', {
        key: 'caste',
        label: 'Caste',
        type: 'text',
      });
      const poll = {
        name: 'Water',
        intro: { en: 'A question from your MLA office.' },
        outro: { en: 'Thank you!' },
        questions: [{ key: 'water', type: 'text', text: { en: 'Is there water in your street?' } }],
        triggers: [{ channel: 'sms', keyword: 'water' }],
        status: 'active',
      };
      const survey = (await as('POST', '/api/surveys', poll)).body.data;
      await conflict('POST', '/api/surveys', '/api/surveys', { ...poll, name: 'Copy' });
      const phone = uniquePhone();
      expect((await as('POST', '/api/voters', { name: 'Asha Devi', phone })).status).toBe(201);
      const run = await as('POST', `/api/surveys/${survey.id}/runs`, { channel: 'sms', recipients: [phone] });
      expect(run.status, run.raw).toBe(202);
      await conflict('DELETE', '/api/surveys/{id}', `/api/surveys/${survey.id}`);
      expect((await as('PATCH', `/api/surveys/${survey.id}`, { status: 'closed' })).status).toBe(200);
      await conflict('PATCH', '/api/surveys/{id}', `/api/surveys/${survey.id}`, { status: 'active' });
      await conflict('POST', '/api/surveys/{id}/runs', `/api/surveys/${survey.id}/runs`, {
        channel: 'sms',
        recipients: [phone],
      });
      const document = (await call(t.app, 'GET', '/api/openapi.json')).body as {
        paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
      };
      for (const [method, route, status] of answered)
        expect(
          Object.keys(document.paths[route]![method.toLowerCase()]!.responses),
          `${method} ${route}`,
        ).toContain(String(status));
    });

    it("an upload's file part is found after another file part, for the voters' and the opt-outs' imports", async () => {
      const owner = await register(t.app);
      const phone = uniquePhone();
      const upload = (url: string, csv: string) => {
        const { payload, contentType } = multipartBody([
          {
            name: 'notes',
            filename: 'notes.txt',
            contentType: 'text/plain',
            content: 'from the ward office',
          },
          { name: 'file', content: csv },
        ]);
        return t.app.inject({
          method: 'POST',
          url,
          payload,
          headers: { authorization: `Bearer ${owner.token}`, 'content-type': contentType },
        });
      };
      const voters = await upload('/api/voters/import', `name,phone\nAsha Devi,${phone}\n`);
      expect(voters.statusCode, voters.body).toBe(200);
      expect(voters.json().data.imported).toBe(1);
      const optOuts = await upload('/api/opt-outs/import', `address,channel\n${uniquePhone()},sms\n`);
      expect(optOuts.statusCode, optOuts.body).toBe(200);
      // Still required: a body without it says so.
      const { payload, contentType } = multipartBody([{ name: 'notes', filename: 'n.txt', content: 'x' }]);
      const missing = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        payload,
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': contentType },
      });
      expect(missing.statusCode).toBe(422);
      expect(missing.json().details.file).toBeDefined();
    });
  });
}
