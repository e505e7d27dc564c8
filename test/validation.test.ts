import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Account, buildTestApp, call, expectError, register, type TestApp } from './helpers.ts';

// The messages depend on the schemas only, not on the database: SQLite is enough.
describe('validation messages name what to send, once per field, for every field at once', () => {
  let t: TestApp;
  let owner: Account;
  beforeAll(async () => {
    t = await buildTestApp('sqlite');
    owner = await register(t.app);
  });
  afterAll(() => t.close());

  it('no validator wording reaches a caller: an empty update names what to send; checks after the schema name their field', async () => {
    const voter = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'Empty Update', phone: '9810000050' },
    });
    expect(voter.status).toBe(201);
    const empty = await call(t.app, 'PUT', `/api/voters/${voter.body.data.id}`, {
      token: owner.token,
      body: {},
    });
    expectError(empty, 422, 'validation_error');
    expect(JSON.stringify(empty.body)).not.toMatch(/must NOT have|properties/);
    expect(Object.values(empty.body.details).flat()).toEqual(['must name at least one field to change.']);
    // A phone check made after the schema (here: a number no country has) names the field in the message.
    const phone = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'Bad Phone', phone: '12' },
    });
    expectError(phone, 422, 'validation_error');
    expect(phone.body.message).toMatch(/phone/);
    expect(phone.body.details.phone[0]).toMatch(/without \+ is read in DEFAULT_COUNTRY/);
  });

  it('a value of the right type that breaks a rule gets that rule only (no "must be null.")', async () => {
    const res = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'A', phone: '+919812345678', email: 'not-an-email', booth: 'x'.repeat(30) },
    });
    expectError(res, 422, 'validation_error');
    expect(res.body.details.email).toEqual(['must be a valid email address.']);
    expect(res.body.details.booth).toEqual(['must be at most 20 characters.']);
  });

  it('a value of no allowed type names every allowed type in one message', async () => {
    const res = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'A', phone: '+919812345678', email: 5, booth: { no: 1 } },
    });
    expectError(res, 422, 'validation_error');
    expect(res.body.details.email).toEqual(['must be a string or null.']);
    expect(res.body.details.booth).toHaveLength(1);
    expect(res.body.details.booth[0]).toMatch(/^must be a string or a number or null\.$/);
  });

  it('an item inside a nullable array is named by its path, without a message for the array', async () => {
    const created = await call(t.app, 'POST', '/api/campaigns', {
      token: owner.token,
      body: { name: 'C', channel: 'sms', message: 'x', recipients: ['+919812345678'] },
    });
    const res = await call(t.app, 'PATCH', `/api/campaigns/${created.body.data.id}`, {
      token: owner.token,
      body: { recipients: [5], subject: '', media_url: 7 },
    });
    expectError(res, 422, 'validation_error');
    expect(res.body.details).toEqual({
      'recipients.0': ['must be a string.'],
      subject: ['must not be empty.'],
      media_url: ['must be a string or null.'],
    });
  });

  it('a phone that is not a number is reported together with the other fields', async () => {
    const res = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: '', phone: 'call me', email: 'nope' },
    });
    expectError(res, 422, 'validation_error');
    expect(res.body.details).toEqual({
      name: ['must not be empty.'],
      phone: [expect.stringMatching(/^must be a valid phone number/)],
      email: ['must be a valid email address.'],
    });
    // A number without + is read in DEFAULT_COUNTRY (IN) and passes the schema.
    const ok = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'Ravi', phone: '98123 45678' },
    });
    expect(ok.status).toBe(201);
    expect(ok.body.data.phone).toBe('+919812345678');
    const empty = await call(t.app, 'POST', '/api/voters', {
      token: owner.token,
      body: { name: 'R', phone: '' },
    });
    expect(empty.body.details.phone).toEqual(['must not be empty.']);
  });

  it('an operation that takes no body answers a body with fields as 422 naming them; {} and no body are fine', async () => {
    const created = await call(t.app, 'POST', '/api/campaigns', {
      token: owner.token,
      body: { name: 'C', channel: 'sms', message: 'x', recipients: ['+919812345678'] },
    });
    const id = created.body.data.id as string;
    for (const path of [
      `/api/campaigns/${id}/preview`,
      `/api/campaigns/${id}/send`,
      `/api/campaigns/${id}/retry-failed`,
    ]) {
      const res = await call(t.app, 'POST', path, { token: owner.token, body: { force: true, x: 1 } });
      expectError(res, 422, 'validation_error');
      expect(res.body.details.force).toEqual(['is not an allowed field: this operation takes no body.']);
      expect(res.body.message).toBe('The request has invalid fields: force, x.');
    }
    const array = await call(t.app, 'POST', `/api/campaigns/${id}/preview`, {
      token: owner.token,
      body: [1],
    });
    expectError(array, 422, 'validation_error');
    expect(array.body.details.body).toEqual(['must be empty or {}: this operation takes no body.']);
    expect(
      (await call(t.app, 'POST', `/api/campaigns/${id}/preview`, { token: owner.token, body: {} })).status,
    ).toBe(200);
    expect((await call(t.app, 'POST', `/api/campaigns/${id}/preview`, { token: owner.token })).status).toBe(
      200,
    );
    // The one-click unsubscribe (public) still takes whatever a mail client posts.
    const unsubscribe = await call(t.app, 'POST', '/api/unsubscribe/bad-token', {
      body: { 'List-Unsubscribe': 'One-Click' },
    });
    expectError(unsubscribe, 404, 'not_found');
  });
});
