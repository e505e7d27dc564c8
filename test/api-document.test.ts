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
