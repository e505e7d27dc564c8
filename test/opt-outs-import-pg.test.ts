import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, call, multipartBody, register, type TestApp } from './helpers.ts';

const pgUrl = process.env.TEST_DATABASE_URL;

/**
 * A large opt-out import on PostgreSQL no longer holds one pooled connection in one transaction for the whole
 * file (a 10 MB file held one for 292 s): it adds rows a few hundred at a time, each chunk committed, so other
 * requests see the opt-outs arrive while it runs and the pool stays free.
 */
describe.skipIf(!pgUrl)('opt-out import on PostgreSQL, in committed chunks', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp('postgres');
  });
  afterAll(() => t.close());

  it('other requests see its opt-outs arrive before it ends', async () => {
    const owner = await register(t.app);
    const rows = 60_000;
    let csv = 'address,channel\n';
    for (let i = 0; i < rows; i++) csv += `+9195${String(i).padStart(8, '0')},sms\n`;
    const { payload, contentType } = multipartBody([{ name: 'file', content: csv }]);
    let done = false;
    const importing = t.app
      .inject({
        method: 'POST',
        url: '/api/opt-outs/import',
        headers: { authorization: `Bearer ${owner.token}`, 'content-type': contentType },
        payload,
      })
      .finally(() => (done = true));
    const seen: number[] = [];
    while (!done) {
      const list = await call(t.app, 'GET', '/api/opt-outs?per_page=1', { token: owner.token });
      expect(list.status).toBe(200);
      seen.push(list.body.data.total as number);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const answer = await importing;
    expect(answer.statusCode).toBe(200);
    expect(answer.json().data).toMatchObject({ created: rows, existing: 0, failed: 0 });
    // Part of the file was visible to others while the import ran.
    expect(seen.some((n) => n > 0 && n < rows)).toBe(true);
    const audit = await call(t.app, 'GET', '/api/audit-log?action=opt_out.created', { token: owner.token });
    expect(audit.body.data.data[0].details).toMatchObject({ imported: rows, existing: 0, failed: 0 });
  }, 120_000);
});
