/**
 * Personal data (the contract's fourth part, "Personal data: the DPDP Act 2023 and its Rules"): the workspace's
 * public id and retention, the notice, consent on the voter (and how it is withdrawn), the public page and its
 * one-time codes, data-principal requests with their due dates and the due_soon event, the access export, the
 * breach register, retention, and PRIVACY_REQUIRE_CONSENT at send time. Erasure has its own file (erasure.test.ts).
 */
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeliveryWorker } from '../src/modules/sending/delivery-worker.ts';
import { applyRetention } from '../src/modules/privacy/privacy-chores.ts';
import { announceDueSoon } from '../src/modules/privacy/privacy.service.ts';
import {
  type Account,
  addMember,
  buildTestApp,
  call,
  dialects,
  expectError,
  register,
  type TestApp,
  uniqueEmail,
  uniquePhone,
  unzip,
} from './helpers.ts';
import { isolatedDatabase } from './messaging-helpers.ts';

const silent = pino({ level: 'silent' });
const DAY = 86_400_000;

for (const dialect of dialects) {
  describe(`personal data (${dialect})`, () => {
    let t: TestApp;
    let owner: Account;
    let manager: Account;
    let volunteer: Account;
    let publicId: string;
    beforeAll(async () => {
      t = await buildTestApp(dialect);
      owner = await register(t.app);
      manager = await addMember(t.app, owner, 'manager');
      volunteer = await addMember(t.app, owner, 'volunteer');
      publicId = (await call(t.app, 'GET', '/api/workspace', { token: volunteer.token })).body.data.public_id;
    });
    afterAll(() => t.close());

    /** The n-th code sent to an address (sent after the answer: waited for). */
    const codeFor = async (address: string, nth = 1) => {
      const channel = address.includes('@') ? 'email' : 'sms';
      const sent = await vi.waitFor(() => {
        const all = t.providers[channel].sent.filter((m) => m.to === address);
        if (all.length < nth) throw new Error(`no code #${nth} to ${address} yet`);
        return all[nth - 1]!;
      });
      return /\b(\d{6})\b/.exec(sent.body)![1]!;
    };

    it('the workspace has a random public id and retention periods (politician writes)', async () => {
      const read = await call(t.app, 'GET', '/api/workspace', { token: owner.token });
      expect(read.body.data.public_id).toMatch(/^[A-Za-z0-9_-]{16}$/);
      expect(read.body.data.retention).toEqual({
        messages_days: null,
        inbound_days: null,
        visits_days: null,
        survey_responses_days: null,
      });
      const changed = await call(t.app, 'PATCH', '/api/workspace', {
        token: owner.token,
        body: { retention: { messages_days: 400, visits_days: 90 } },
      });
      expect(changed.status, changed.raw).toBe(200);
      expect(changed.body.data.retention).toMatchObject({
        messages_days: 400,
        visits_days: 90,
        inbound_days: null,
      });
      const back = await call(t.app, 'PATCH', '/api/workspace', {
        token: owner.token,
        body: { retention: { messages_days: null, visits_days: null } },
      });
      expect(back.body.data.retention.messages_days).toBeNull();
      expectError(
        await call(t.app, 'PATCH', '/api/workspace', {
          token: owner.token,
          body: { retention: { messages_days: 0 } },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'PATCH', '/api/workspace', {
          token: owner.token,
          body: { retention: { audit_days: 1 } },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'PATCH', '/api/workspace', {
          token: manager.token,
          body: { retention: { inbound_days: 5 } },
        }),
        403,
        'forbidden',
      );
    });

    it('the notice: versions, politician writes, everyone reads; audited', async () => {
      const first = await call(t.app, 'GET', '/api/privacy/notice', { token: volunteer.token });
      expect(first.body.data).toMatchObject({ version: 0, texts: {}, public_url: `/privacy/${publicId}` });
      const body = {
        texts: {
          en: 'We keep your name, phone and booth to tell you about our campaign.',
          hi: 'हम आपका नाम, फ़ोन और बूथ अपने अभियान की जानकारी देने के लिए रखते हैं।',
        },
        contact: 'Grievance officer, 12 Lanka Road, Varanasi; privacy@example.org',
      };
      expectError(
        await call(t.app, 'PUT', '/api/privacy/notice', { token: manager.token, body }),
        403,
        'forbidden',
      );
      const v1 = await call(t.app, 'PUT', '/api/privacy/notice', { token: owner.token, body });
      expect(v1.status, v1.raw).toBe(200);
      expect(v1.body.data).toMatchObject({ version: 1, texts: body.texts, contact: body.contact });
      const v2 = await call(t.app, 'PUT', '/api/privacy/notice', { token: owner.token, body });
      expect(v2.body.data.version).toBe(2);
      expectError(
        await call(t.app, 'PUT', '/api/privacy/notice', {
          token: owner.token,
          body: { texts: { en: '   ' }, contact: 'x' },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'PUT', '/api/privacy/notice', {
          token: owner.token,
          body: { texts: { en: 'x', fr: 'y' }, contact: 'x' },
        }),
        422,
        'validation_error',
      );
      const audit = await call(t.app, 'GET', '/api/audit-log?action=privacy_notice.updated', {
        token: owner.token,
      });
      expect(audit.body.data.data).toHaveLength(2);
    });

    it("consent on the voter: the API records it with the notice's version; STOP and START change it", async () => {
      const phone = uniquePhone();
      const made = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Kamla Devi', phone, consent: 'given' },
      });
      expect(made.status, made.raw).toBe(201);
      const read = async () =>
        (await call(t.app, 'GET', `/api/voters/${made.body.data.id}`, { token: owner.token })).body.data
          .consent;
      expect(await read()).toMatchObject({ status: 'given', notice_version: 2, source: 'api' });
      const patched = await call(t.app, 'PUT', `/api/voters/${made.body.data.id}`, {
        token: manager.token,
        body: { consent: 'withdrawn' },
      });
      expect(patched.status, patched.raw).toBe(200);
      expect(patched.body.data.consent).toMatchObject({ status: 'withdrawn', source: 'api' });
      expectError(
        await call(t.app, 'PUT', `/api/voters/${made.body.data.id}`, {
          token: owner.token,
          body: { consent: 'maybe' },
        }),
        422,
        'validation_error',
      );
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'START' },
      });
      expect(await read()).toMatchObject({ status: 'given', source: 'keyword' });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'STOP' },
      });
      expect(await read()).toMatchObject({ status: 'withdrawn', source: 'keyword' });
      // At the door: a visit made offline an hour ago does not undo the newer STOP; one made now records it.
      const visit = (consent: string, at: number) =>
        call(t.app, 'POST', '/api/visits', {
          token: manager.token,
          body: {
            visits: [
              {
                client_id: crypto.randomUUID(),
                voter_id: made.body.data.id,
                outcome: 'met',
                visited_at: new Date(at).toISOString(),
                consent,
              },
            ],
          },
        });
      expect((await visit('given', Date.now() - 3_600_000)).body.data.visits[0].status).toBe('created');
      expect(await read()).toMatchObject({ status: 'withdrawn', source: 'keyword' });
      expect((await visit('given', Date.now())).body.data.visits[0].status).toBe('created');
      expect(await read()).toMatchObject({ status: 'given', source: 'visit' });
      const unknown = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'No Word', phone: uniquePhone() },
      });
      const fresh = await call(t.app, 'GET', `/api/voters/${unknown.body.data.id}`, { token: owner.token });
      expect(fresh.body.data.consent).toEqual({
        status: 'unknown',
        notice_version: null,
        source: null,
        at: null,
      });
    });

    it('an import records the consent column (source import)', async () => {
      const a = uniquePhone();
      const b = uniquePhone();
      const { payload, contentType } = (await import('./helpers.ts')).multipartBody([
        {
          name: 'file',
          content: `Name,Mobile No,Consent\nAsha Rao,${a},yes\nBina Rao,${b},no\nCara Rao,${uniquePhone()},perhaps\n`,
        },
      ]);
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/voters/import',
        headers: { 'content-type': contentType, authorization: `Bearer ${owner.token}` },
        payload,
      });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().data.warnings).toEqual([
        expect.objectContaining({ line: 4, field: 'consent', value: 'perhaps' }),
      ]);
      const list = await call(t.app, 'GET', `/api/voters?search=${encodeURIComponent('Rao')}&per_page=10`, {
        token: owner.token,
      });
      const ids = Object.fromEntries(
        list.body.data.data.map((v: { name: string; id: number }) => [v.name, v.id]),
      );
      const consent = async (id: number) =>
        (await call(t.app, 'GET', `/api/voters/${id}`, { token: owner.token })).body.data.consent;
      expect(await consent(ids['Asha Rao'])).toMatchObject({
        status: 'given',
        source: 'import',
        notice_version: 2,
      });
      expect(await consent(ids['Bina Rao'])).toMatchObject({ status: 'withdrawn', source: 'import' });
      expect(await consent(ids['Cara Rao'])).toMatchObject({ status: 'unknown' });
    });

    it('the public page speaks English and Hindi, and says nothing of an unknown page but 404', async () => {
      const en = await call(t.app, 'GET', `/privacy/${publicId}`, { headers: { accept: 'text/html' } });
      expect(en.status).toBe(200);
      expect(en.headers['content-type']).toContain('text/html');
      expect(en.headers['content-security-policy']).toContain("default-src 'none'");
      expect(en.raw).toContain('We keep your name, phone and booth');
      expect(en.raw).toContain('Data Protection Board');
      expect(en.raw).toContain('Grievance officer, 12 Lanka Road');
      expect(en.raw).toContain(`<form method="post" action="/privacy/${publicId}/code">`);
      const hi = await call(t.app, 'GET', `/privacy/${publicId}?lang=hi`);
      expect(hi.raw).toContain('lang="hi"');
      expect(hi.raw).toContain('हम आपका नाम');
      expect(hi.raw).toContain('डेटा संरक्षण बोर्ड');
      const byHeader = await call(t.app, 'GET', `/privacy/${publicId}`, {
        headers: { 'accept-language': 'hi-IN,hi;q=0.9' },
      });
      expect(byHeader.raw).toContain('आपके अधिकार');
      const missing = await call(t.app, 'GET', '/privacy/NoSuchPage123', {
        headers: { accept: 'text/html' },
      });
      expect(missing.status).toBe(404);
      expect(missing.raw).toContain('does not exist');
      expectError(await call(t.app, 'GET', '/privacy/NoSuchPage123'), 404, 'not_found');
      expect((await call(t.app, 'GET', '/privacy/bad%20id')).status).toBe(422);
      // Both steps of the form, posted to a page that does not exist: the envelope, or the page for a browser.
      for (const step of ['code', 'requests']) {
        const body = { address: uniquePhone(), ask: 'access', code: '123456' };
        expectError(await call(t.app, 'POST', `/privacy/NoSuchPage123/${step}`, { body }), 404, 'not_found');
        const page = await call(t.app, 'POST', `/privacy/NoSuchPage123/${step}`, {
          body,
          headers: { accept: 'text/html' },
        });
        expect(page.status, step).toBe(404);
        expect(page.raw, step).toContain('does not exist');
      }
    });

    it('the public form: a code to the address, then a verified request; the answer never tells who is known', async () => {
      const phone = uniquePhone();
      await call(t.app, 'POST', '/api/voters', { token: owner.token, body: { name: 'Ravi Kumar', phone } });
      const stranger = uniquePhone();
      const known = await call(t.app, 'POST', `/privacy/${publicId}/code`, {
        body: { address: phone, ask: 'access' },
      });
      const unknown = await call(t.app, 'POST', `/privacy/${publicId}/code`, {
        body: { address: stranger, ask: 'access' },
      });
      expect(known.status, known.raw).toBe(200);
      expect(unknown.body).toEqual(known.body);
      expect(known.body.data).toEqual({ expires_in: 600 });
      const code = await codeFor(phone);
      await codeFor(stranger);
      const rows = await t.db.kysely.selectFrom('privacy_codes').selectAll().execute();
      expect(JSON.stringify(rows)).not.toContain(phone);
      expect(JSON.stringify(rows)).not.toContain(code);
      const wrong = code === '000000' ? '111111' : '000000';
      expectError(
        await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
          body: { address: phone, code: wrong, ask: 'access' },
        }),
        401,
        'unauthorized',
      );
      const made = await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
        body: { address: phone, code, ask: 'access', note: 'Please send me my data' },
      });
      expect(made.status, made.raw).toBe(200);
      expect(made.body.data.request_id).toMatch(/^dpr_\d+$/);
      expectError(
        await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
          body: { address: phone, code, ask: 'access' },
        }),
        401,
        'unauthorized',
      );
      const request = await call(t.app, 'GET', `/api/privacy/requests/${made.body.data.request_id}`, {
        token: manager.token,
      });
      expect(request.body.data).toMatchObject({
        type: 'access',
        address: phone,
        status: 'verified',
        received_via: 'public_form',
        note: 'Please send me my data',
        overdue: false,
      });
      expect(request.body.data.voter_id).toEqual(expect.any(Number));
      expect(Date.parse(request.body.data.due_at) - Date.parse(request.body.data.created_at)).toBe(30 * DAY);
      expectError(
        await call(t.app, 'POST', `/privacy/${publicId}/code`, {
          body: { address: 'not an address', ask: 'access' },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'POST', `/privacy/${publicId}/code`, {
          body: { address: phone, ask: 'everything' },
        }),
        422,
        'validation_error',
      );
    });

    it('the public form withdraws consent: the voters with the address, and an opt-out of every channel', async () => {
      const email = uniqueEmail('withdraw');
      const made = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Meena Joshi', phone: uniquePhone(), email, consent: 'given' },
      });
      await call(t.app, 'POST', `/privacy/${publicId}/code`, { body: { address: email, ask: 'withdraw' } });
      const code = await codeFor(email);
      const done = await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
        body: { address: email, code, ask: 'withdraw' },
      });
      expect(done.body.data).toEqual({ withdrawn: true });
      const voter = await call(t.app, 'GET', `/api/voters/${made.body.data.id}`, { token: owner.token });
      expect(voter.body.data.consent).toMatchObject({ status: 'withdrawn', source: 'form' });
      const optOuts = await call(t.app, 'GET', `/api/opt-outs?address=${encodeURIComponent(email)}`, {
        token: owner.token,
      });
      expect(optOuts.body.data.data[0]).toMatchObject({ channel: 'all', source: 'privacy_form' });
    });

    it('a browser posts the form and reads pages, in its language', async () => {
      const phone = uniquePhone();
      const form = (fields: Record<string, string>) => new URLSearchParams(fields).toString();
      const step1 = await call(t.app, 'POST', `/privacy/${publicId}/code`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: form({ address: phone, ask: 'erasure', note: '', lang: 'hi' }),
      });
      expect(step1.status, step1.raw).toBe(200);
      expect(step1.raw).toContain(`action="/privacy/${publicId}/requests"`);
      expect(step1.raw).toContain('6 अंकों का कोड');
      const code = await codeFor(phone);
      const bad = await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: form({ address: phone, ask: 'erasure', code: '12', lang: 'en' }),
      });
      expect(bad.status).toBe(401);
      expect(bad.raw).toContain('The code is wrong');
      const step2 = await call(t.app, 'POST', `/privacy/${publicId}/requests`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: form({ address: phone, ask: 'erasure', code, lang: 'en' }),
      });
      expect(step2.status).toBe(200);
      expect(step2.raw).toMatch(
        /Your request dpr_\d+ is received\. The office will answer by \d{4}-\d{2}-\d{2}\./,
      );
      const badAddress = await call(t.app, 'POST', `/privacy/${publicId}/code`, {
        headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'text/html' },
        body: form({ address: 'abc', ask: 'access' }),
      });
      expect(badAddress.status).toBe(422);
      expect(badAddress.raw).toContain('Enter your phone number');
    });

    it('requests: the office records, lists, completes; closed ones stay closed; volunteers cannot see them', async () => {
      const phone = uniquePhone();
      expectError(
        await call(t.app, 'POST', '/api/privacy/requests', {
          token: manager.token,
          body: { type: 'access', address: '12' },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'POST', '/api/privacy/requests', {
          token: manager.token,
          body: { type: 'access', address: phone, voter_id: 999_999_999 },
        }),
        422,
        'validation_error',
      );
      const made = await call(t.app, 'POST', '/api/privacy/requests', {
        token: manager.token,
        body: { type: 'correction', address: phone.slice(3), note: 'Wrong booth' },
      });
      expect(made.status, made.raw).toBe(201);
      expect(made.body.data).toMatchObject({
        address: phone,
        status: 'open',
        received_via: 'office',
        voter_id: null,
      });
      expectError(
        await call(t.app, 'GET', '/api/privacy/requests', { token: volunteer.token }),
        403,
        'forbidden',
      );
      // Overdue: a request past its due date.
      await t.db.kysely
        .updateTable('privacy_requests')
        .set({ due_at: new Date(Date.now() - DAY).toISOString() })
        .where('id', '=', Number(made.body.data.id.slice(4)))
        .execute();
      const overdue = await call(t.app, 'GET', '/api/privacy/requests?overdue=true', {
        token: manager.token,
      });
      expect(overdue.body.data.data.map((r: { id: string }) => r.id)).toEqual([made.body.data.id]);
      const done = await call(t.app, 'PATCH', `/api/privacy/requests/${made.body.data.id}`, {
        token: manager.token,
        body: { status: 'completed', note: 'Booth corrected' },
      });
      expect(done.body.data).toMatchObject({ status: 'completed', overdue: false, note: 'Booth corrected' });
      expect(done.body.data.completed_at).not.toBeNull();
      expectError(
        await call(t.app, 'PATCH', `/api/privacy/requests/${made.body.data.id}`, {
          token: manager.token,
          body: { status: 'open' },
        }),
        409,
        'conflict',
      );
      expectError(
        await call(t.app, 'GET', '/api/privacy/requests/dpr_999999999', { token: manager.token }),
        404,
        'not_found',
      );
      const actions = (
        await call(t.app, 'GET', '/api/audit-log?per_page=100', { token: owner.token })
      ).body.data.data.map((e: { action: string }) => e.action);
      expect(actions).toEqual(
        expect.arrayContaining(['privacy_request.created', 'privacy_request.completed']),
      );
      // Erasure is the politician's, and only for an erasure request.
      expectError(
        await call(t.app, 'POST', `/api/privacy/requests/${made.body.data.id}/erase`, {
          token: manager.token,
        }),
        403,
        'forbidden',
      );
      expectError(
        await call(t.app, 'POST', `/api/privacy/requests/${made.body.data.id}/erase`, { token: owner.token }),
        409,
        'conflict',
      );
    });

    it('a reply ERASE or MYDATA records a request from its address (received_via keyword)', async () => {
      const phone = uniquePhone();
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Lata Mishra', phone },
      });
      for (const body of ['erase.', 'मेरा डेटा', 'Please erase my data']) {
        const res = await call(t.app, 'POST', '/api/inbound', {
          token: owner.token,
          body: { channel: 'sms', from: phone, body },
        });
        expect(res.status, res.raw).toBe(201);
      }
      const list = await call(t.app, 'GET', '/api/privacy/requests?per_page=100', { token: manager.token });
      const mine = list.body.data.data.filter((r: { address: string }) => r.address === phone);
      expect(mine.map((r: { type: string }) => r.type).sort()).toEqual(['access', 'erasure']);
      expect(mine[0]).toMatchObject({
        received_via: 'keyword',
        status: 'open',
        voter_id: voter.body.data.id,
      });
    });

    it('privacy_request.due_soon goes once, 7 days before the due date', async () => {
      const made = await call(t.app, 'POST', '/api/privacy/requests', {
        token: owner.token,
        body: { type: 'grievance', address: uniqueEmail('soon') },
      });
      const id = Number(made.body.data.id.slice(4));
      await t.db.kysely
        .updateTable('privacy_requests')
        .set({ due_at: new Date(Date.now() + 3 * DAY).toISOString() })
        .where('id', '=', id)
        .execute();
      expect(await announceDueSoon(t.db.kysely)).toBeGreaterThanOrEqual(1);
      expect(await announceDueSoon(t.db.kysely)).toBe(0);
      const events = await t.db.kysely
        .selectFrom('live_events')
        .selectAll()
        .where('workspace_id', '=', owner.user.workspace_id)
        .where('type', '=', 'privacy_request.due_soon')
        .execute();
      expect(events).toHaveLength(1);
      expect(JSON.parse(events[0]!.data)).toMatchObject({ id: made.body.data.id, type: 'grievance' });
    });

    it('the access export: a ZIP of JSON files of everything kept about the person (politician; audited)', async () => {
      const phone = uniquePhone();
      const voter = await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Suresh Yadav', phone, tags: ['Volunteer'] },
      });
      await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: phone, message: 'Meeting at 5' },
      });
      await call(t.app, 'POST', '/api/inbound', {
        token: owner.token,
        body: { channel: 'sms', from: phone, body: 'I will come' },
      });
      const request = await call(t.app, 'POST', '/api/privacy/requests', {
        token: owner.token,
        body: { type: 'access', address: phone },
      });
      expect(request.body.data.voter_id).toBe(voter.body.data.id);
      const url = `/api/privacy/requests/${request.body.data.id}/export`;
      expectError(await call(t.app, 'GET', url, { token: manager.token }), 403, 'forbidden');
      const res = await t.app.inject({
        method: 'GET',
        url,
        headers: { authorization: `Bearer ${owner.token}` },
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toBe('application/zip');
      const files = unzip(res.rawPayload);
      expect([...files.keys()].sort()).toEqual([
        'audit.json',
        'conversations.json',
        'grievances.json',
        'messages_received.json',
        'messages_sent.json',
        'opt_outs.json',
        'poll_day_marks.json',
        'request.json',
        'survey_responses.json',
        'visits.json',
        'voter.json',
      ]);
      const json = (name: string) => JSON.parse(files.get(name)!.toString('utf8'));
      expect(json('voter.json')).toMatchObject({ name: 'Suresh Yadav', phone, tags: ['Volunteer'] });
      expect(json('messages_sent.json')[0]).toMatchObject({ to: phone, body: 'Meeting at 5' });
      expect(json('messages_received.json')[0]).toMatchObject({ from: phone, body: 'I will come' });
      expect(json('conversations.json')).toHaveLength(1);
      const audit = await call(t.app, 'GET', '/api/audit-log?action=privacy.exported', {
        token: owner.token,
      });
      expect(audit.body.data.data[0]).toMatchObject({ target_id: request.body.data.id });
    });

    it('the breach register: 72 hours to tell the Board, overdue until it is told (politician)', async () => {
      const detected = new Date(Date.now() - 80 * 3_600_000).toISOString();
      expectError(
        await call(t.app, 'POST', '/api/privacy/breaches', {
          token: manager.token,
          body: { detected_at: detected, description: 'Laptop lost' },
        }),
        403,
        'forbidden',
      );
      const made = await call(t.app, 'POST', '/api/privacy/breaches', {
        token: owner.token,
        body: { detected_at: detected, description: 'A laptop with the roll was lost', affected_count: 5000 },
      });
      expect(made.status, made.raw).toBe(201);
      expect(made.body.data).toMatchObject({
        id: expect.stringMatching(/^brc_\d+$/),
        overdue: true,
        board_notified_at: null,
        board_report_due: new Date(Date.parse(detected) + 72 * 3_600_000).toISOString(),
      });
      const told = await call(t.app, 'PATCH', `/api/privacy/breaches/${made.body.data.id}`, {
        token: owner.token,
        body: { board_notified_at: new Date().toISOString() },
      });
      expect(told.body.data.overdue).toBe(false);
      expectError(
        await call(t.app, 'PATCH', `/api/privacy/breaches/${made.body.data.id}`, {
          token: owner.token,
          body: { people_notified_at: new Date(Date.now() + 2 * DAY).toISOString() },
        }),
        422,
        'validation_error',
      );
      expectError(
        await call(t.app, 'PATCH', '/api/privacy/breaches/brc_999999999', {
          token: owner.token,
          body: { description: 'x' },
        }),
        404,
        'not_found',
      );
      const list = await call(t.app, 'GET', '/api/privacy/breaches', { token: owner.token });
      expect(list.body.data.data[0].id).toBe(made.body.data.id);
      const audit = await call(t.app, 'GET', '/api/audit-log?action=breach.recorded', { token: owner.token });
      expect(audit.body.data.data).toHaveLength(1);
    });

    it('retention deletes older rows in chunks, never a queued message', async () => {
      const other = await register(t.app);
      const ws = other.user.workspace_id as number;
      const old = new Date(Date.now() - 40 * DAY).toISOString();
      const recent = new Date(Date.now() - 5 * DAY).toISOString();
      const message = (status: 'sent' | 'queued', created_at: string) => ({
        workspace_id: ws,
        campaign_id: null,
        channel: 'sms' as const,
        to: uniquePhone(),
        body: 'x',
        subject: null,
        media_url: null,
        template_id: null,
        status,
        cost: 1,
        provider: 'sandbox',
        provider_message_id: null,
        claimed_by: null,
        lease_until: null,
        attempts: 0,
        next_attempt_at: created_at,
        error: null,
        error_code: null,
        created_at,
        updated_at: created_at,
        sent_at: null,
        delivered_at: null,
        failed_at: null,
      });
      await t.db.kysely
        .insertInto('messages')
        .values([message('sent', old), message('queued', old), message('sent', recent)])
        .execute();
      await t.db.kysely
        .insertInto('inbound_messages')
        .values(
          [old, recent].map((created_at) => ({
            workspace_id: ws,
            channel: 'sms' as const,
            from: uniquePhone(),
            body: 'hi',
            keyword: null,
            provider: 'sandbox',
            created_at,
          })),
        )
        .execute();
      const count = async (table: 'messages' | 'inbound_messages') =>
        Number(
          (
            await t.db.kysely
              .selectFrom(table)
              .select((eb) => eb.fn.countAll<number>().as('n'))
              .where('workspace_id', '=', ws)
              .executeTakeFirstOrThrow()
          ).n,
        );
      await applyRetention(t.db.kysely);
      expect([await count('messages'), await count('inbound_messages')]).toEqual([3, 2]);
      await call(t.app, 'PATCH', '/api/workspace', {
        token: other.token,
        body: { retention: { messages_days: 30, inbound_days: 30 } },
      });
      await applyRetention(t.db.kysely);
      expect([await count('messages'), await count('inbound_messages')]).toEqual([2, 1]);
      const left = await t.db.kysely
        .selectFrom('messages')
        .select('status')
        .where('workspace_id', '=', ws)
        .execute();
      expect(left.map((m) => m.status).sort()).toEqual(['queued', 'sent']);
    });
  });

  describe(`PRIVACY_REQUIRE_CONSENT and the code's rate limit (${dialect})`, () => {
    let t: TestApp;
    let database: Awaited<ReturnType<typeof isolatedDatabase>>;
    beforeAll(async () => {
      database = await isolatedDatabase(dialect);
      t = await buildTestApp(dialect, {
        ...database.env,
        PRIVACY_REQUIRE_CONSENT: 'true',
        RATE_LIMIT_OTP_PER_MIN: '2',
      });
    });
    afterAll(async () => {
      await t.close();
      await database.drop();
    });

    it('bulk messages go only to voters whose consent is given; a single send is not held to it', async () => {
      const owner = await register(t.app);
      const given = uniquePhone();
      const unknown = uniquePhone();
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Yes', phone: given, consent: 'given' },
      });
      await call(t.app, 'POST', '/api/voters', {
        token: owner.token,
        body: { name: 'Maybe', phone: unknown },
      });
      const broadcast = await call(t.app, 'POST', '/api/messages/broadcast', {
        token: owner.token,
        body: { channel: 'sms', message: 'Rally at 5', recipients: [given, unknown] },
      });
      expect(broadcast.status, broadcast.raw).toBe(202);
      const single = await call(t.app, 'POST', '/api/messages/send', {
        token: owner.token,
        body: { channel: 'sms', to: unknown, message: 'Your grievance is resolved' },
      });
      expect(single.status, single.raw).toBe(201);
      await new DeliveryWorker({ db: t.db, config: t.config, providers: t.providers, log: silent }).drain();
      const rows = await t.db.kysely
        .selectFrom('messages')
        .select(['to', 'status', 'error_code', 'campaign_id'])
        .where('workspace_id', '=', owner.user.workspace_id)
        .execute();
      const bulk = rows.filter((r) => r.campaign_id !== null);
      expect(bulk.find((r) => r.to === unknown)).toMatchObject({
        status: 'failed',
        error_code: 'no_consent',
      });
      expect(bulk.find((r) => r.to === given)?.status).not.toBe('failed');
      expect(rows.find((r) => r.campaign_id === null)?.status).not.toBe('failed');
      const failures = await call(t.app, 'GET', '/api/messages/failures', { token: owner.token });
      expect(JSON.stringify(failures.body.data)).toContain('no_consent');
    });

    it('the public form limits codes per address', async () => {
      const owner = await register(t.app);
      const publicId = (await call(t.app, 'GET', '/api/workspace', { token: owner.token })).body.data
        .public_id;
      const address = uniquePhone();
      const ask = () =>
        call(t.app, 'POST', `/privacy/${publicId}/code`, { body: { address, ask: 'access' } });
      expect((await ask()).status).toBe(200);
      expect((await ask()).status).toBe(200);
      expectError(await ask(), 429, 'rate_limit_exceeded');
    });
  });
}
