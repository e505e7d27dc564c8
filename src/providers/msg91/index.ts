import { createHash } from 'node:crypto';
import { Type } from 'typebox';
import {
  type CallbackRequest,
  type ErrorVerdict,
  httpVerdict,
  type ProviderAdapter,
  type ProviderAnswerFacts,
} from '../adapter.ts';
import { callProvider, providerText, withoutPlus } from '../http.ts';
import {
  type MessageProvider,
  type OutgoingMessage,
  ProviderError,
  type ReportOutcome,
  type SendResult,
} from '../provider.ts';

export interface Msg91Account {
  baseUrl: string;
  authkey: string;
  sender: string;
}

/**
 * MSG91's answers (its API error codes; test/fixtures/providers/msg91 cites the pages): 401, and the codes that
 * refuse the account itself (106 missing and 207 invalid authkey, 208 IP blacklisted, 418 IP not whitelisted,
 * 302 expired and 303 banned account) are `auth_failed`, which switches the account off until the office fixes
 * it; 202 (invalid mobile number) is `invalid_recipient`; 429 and any 5xx are retried (after Retry-After);
 * anything else (301 insufficient balance, ...) refuses the request.
 */
const AUTH_CODES = new Set(['106', '207', '208', '302', '303', '418']);
function errorFor(answer: ProviderAnswerFacts): ErrorVerdict {
  const common = httpVerdict(answer);
  if (common) return common;
  if (answer.status === 401 || AUTH_CODES.has(answer.code ?? ''))
    return { error_code: 'auth_failed', retry: false };
  if (answer.code === '202') return { error_code: 'invalid_recipient', retry: false };
  return { error_code: 'provider_rejected', retry: false };
}

/**
 * MSG91's Flow API (SMS through templates registered with DLT in the MSG91 panel): `POST /api/v5/flow` with
 * the `authkey` header and `{ template_id, short_url: "0", recipients: [{ mobiles, <variable>: <value> }] }`,
 * up to MSG91_BATCH recipients of one template in one request. The answer's request id is each message's
 * provider id; delivery reports name it with the number.
 */
export class Msg91Provider implements MessageProvider {
  readonly name = 'msg91';
  readonly channel = 'sms' as const;
  readonly batchLimit = 1000;

  constructor(private readonly account: Msg91Account) {}

  send(message: OutgoingMessage, signal?: AbortSignal): Promise<SendResult> {
    return this.request([message], signal);
  }

  /**
   * A batch in one request. MSG91 refuses a whole request for one number it will not take (code 202). Such a
   * batch is split by what the answer says: the numbers it names fail and the rest go again in one request; where
   * it names none, the batch goes again in halves, down to the numbers themselves, so that a refused number fails
   * alone and the others go (each part with its own request id). The halving costs at most SPLIT_REQUESTS more
   * requests a batch (not 2N-1, which would trip MSG91's own limits when every number is refused); parts still
   * refused then fail whole. Any other refusal (the credentials, the template, the balance) is the account's: the
   * whole batch fails at once.
   */
  async sendMany(messages: OutgoingMessage[], signal?: AbortSignal): Promise<SendResult> {
    const { ids, refused } = await this.settle(messages, signal, { left: SPLIT_REQUESTS });
    if (refused.length === messages.length) throw refused[0]![1];
    return {
      providerMessageId: ids.find((id) => id !== undefined)!,
      ids: ids.map((id) => id ?? ''),
      refused: refused.map(([i, error]) => [i, error.message]),
    };
  }

  private async settle(
    messages: OutgoingMessage[],
    signal: AbortSignal | undefined,
    budget: { left: number },
  ): Promise<Settled> {
    try {
      const { providerMessageId } = await this.request(messages, signal);
      return { ids: messages.map(() => providerMessageId), refused: [] };
    } catch (error) {
      if (!(error instanceof ProviderError) || error.code !== 'invalid_recipient') throw error;
      const all = (): Settled => ({
        ids: messages.map(() => undefined),
        refused: messages.map((_, i) => [i, error]),
      });
      if (messages.length === 1) return all();
      // The numbers the answer names: they fail, the others go again together.
      const named = new Set(error instanceof Msg91Refusal ? error.numbers : []);
      const bad = messages.flatMap((m, i) => (named.has(withoutPlus(m.to)) ? [i] : []));
      if (bad.length > 0) {
        const rest = messages.flatMap((_, i) => (bad.includes(i) ? [] : [i]));
        budget.left -= 1;
        const again =
          rest.length === 0 || budget.left < 0
            ? undefined
            : await this.settle(
                rest.map((i) => messages[i]!),
                signal,
                budget,
              );
        if (!again) return all();
        const ids: Array<string | undefined> = messages.map(() => undefined);
        const refused: Array<[number, ProviderError]> = bad.map((i) => [i, error]);
        rest.forEach((i, k) => (ids[i] = again.ids[k]));
        for (const [k, e] of again.refused) refused.push([rest[k]!, e]);
        return { ids, refused: refused.sort((a, b) => a[0] - b[0]) };
      }
      if (budget.left < 2) return all();
      budget.left -= 2;
      const half = Math.ceil(messages.length / 2);
      const first = await this.settle(messages.slice(0, half), signal, budget);
      const second = await this.settle(messages.slice(half), signal, budget);
      return {
        ids: [...first.ids, ...second.ids],
        refused: [
          ...first.refused,
          ...second.refused.map(([i, e]) => [i + half, e] as [number, ProviderError]),
        ],
      };
    }
  }

  private async request(messages: OutgoingMessage[], signal?: AbortSignal): Promise<SendResult> {
    const templateId = messages[0]?.providerTemplate?.ids.msg91;
    if (!templateId || messages.some((m) => m.providerTemplate?.ids.msg91 !== templateId)) {
      throw new ProviderError(
        'MSG91 sends templates only: use a tpl_ template with provider_template_ids.msg91.',
        false,
      );
    }
    const recipients = messages.map((m) => ({
      mobiles: withoutPlus(m.to),
      ...Object.fromEntries(m.providerTemplate?.variables ?? []),
    }));
    const answer = await callProvider(
      'MSG91',
      `${this.account.baseUrl}/api/v5/flow`,
      {
        method: 'POST',
        headers: {
          authkey: this.account.authkey,
          'content-type': 'application/json',
          accept: 'application/json',
        },
        body: JSON.stringify({ template_id: templateId, short_url: '0', recipients }),
      },
      signal,
    );
    const { type, message, code } = answer.body as { type?: unknown; message?: unknown; code?: unknown };
    if (answer.status < 300 && type === 'success' && typeof message === 'string' && message !== '') {
      return { providerMessageId: message };
    }
    const given = code === undefined ? '' : String(code);
    const reason = `MSG91 answered ${answer.status}${given ? ` (code ${given})` : ''}: ${providerText(message)}`;
    const verdict = errorFor({ status: answer.status, code: given, retryAfterMs: answer.retryAfterMs });
    // The numbers its text names (kept out of `reason`, which reaches error_message and the logs).
    const numbers = typeof message === 'string' ? (message.slice(0, 100_000).match(/\d{10,15}/g) ?? []) : [];
    throw new Msg91Refusal(reason, verdict, numbers);
  }
}

/** The most requests a refused batch may cost beyond its first (see sendMany). */
const SPLIT_REQUESTS = 16;

type Settled = { ids: Array<string | undefined>; refused: Array<[number, ProviderError]> };

/** MSG91's refusal, with the numbers its answer named (digits, without the plus). */
class Msg91Refusal extends ProviderError {
  constructor(
    reason: string,
    verdict: ErrorVerdict,
    readonly numbers: readonly string[],
  ) {
    super(reason, verdict.retry, verdict.error_code, verdict.after_ms);
  }
}

export interface Msg91Report {
  requestId: string;
  number: string;
  status: string;
  desc: string;
}

/** A delivery report's rows, from either of MSG91's forms (the form field `data`, or JSON). */
export function msg91Reports(body: unknown): Msg91Report[] {
  const out: Msg91Report[] = [];
  const text = (v: unknown) => (v === undefined || v === null ? '' : String(v));
  const add = (item: unknown) => {
    if (!item || typeof item !== 'object') return;
    const r = item as Record<string, unknown>;
    const requestId = text(r.requestId ?? r.request_id);
    if (Array.isArray(r.report)) {
      for (const row of r.report) {
        if (!row || typeof row !== 'object') continue;
        const x = row as Record<string, unknown>;
        out.push({ requestId, number: text(x.number), status: text(x.status), desc: text(x.desc) });
      }
    } else if (r.number !== undefined) {
      out.push({ requestId, number: text(r.number), status: text(r.status), desc: text(r.desc) });
    }
  };
  let data: unknown = body;
  if (
    body &&
    typeof body === 'object' &&
    !Array.isArray(body) &&
    typeof (body as { data?: unknown }).data === 'string'
  ) {
    try {
      data = JSON.parse((body as { data: string }).data);
    } catch {
      return [];
    }
  }
  for (const item of Array.isArray(data) ? data : [data]) add(item);
  return out.filter((r) => r.requestId !== '' && r.number !== '');
}

/** MSG91's status codes: 1 delivered; 2, 17 undeliverable; 9 DND; 16, 25 rejected (DLT when it says so). */
export function msg91Outcome(report: Msg91Report): ReportOutcome {
  const said = `MSG91 status ${report.status}${report.desc ? `: ${providerText(report.desc)}` : ''}`;
  switch (report.status) {
    case '1':
      return { status: 'delivered' };
    case '2':
    case '17':
      return { status: 'failed', code: 'undeliverable', error: said };
    case '9':
      return { status: 'failed', code: 'dnd', error: said };
    case '16':
    case '25':
      return {
        status: 'failed',
        code: /dlt/i.test(report.desc) ? 'dlt_rejected' : 'provider_rejected',
        error: said,
      };
    default:
      return { status: 'sent', error: said };
  }
}

/**
 * A reply forwarded by MSG91's inbound SMS (a virtual number or keyword's "forward to URL"): MSG91 calls the URL
 * with the sender's number, the text and the time, by GET (query) or POST (form or JSON). MSG91's help pages
 * (https://msg91.com/help/what-is-a-virtual-number-or-longcode-what-is-keyword-and-inbox-balance) describe the
 * forwarding without a field table; the names taken here are those its panel sends (`number`, `message`,
 * `keyword`, `inboundNumber`, `date`), with `sender`/`mobile` and `content`/`text` accepted as well. MSG91 gives
 * no message id: the reply's id is derived from its sender, text and time, so a repeated forward is kept once.
 */
export function msg91Inbound(
  fields: Record<string, string>,
): { from: string; body: string; id: string } | undefined {
  const from = fields.number ?? fields.sender ?? fields.mobile ?? fields.from ?? '';
  const body = fields.message ?? fields.content ?? fields.text ?? '';
  if (!from || !body) return undefined;
  const id = `msg91:${createHash('sha256')
    .update(`${from}|${body}|${fields.date ?? ''}`)
    .digest('hex')
    .slice(0, 40)}`;
  return { from, body, id };
}

/** MSG91: DLT-registered SMS through its Flow templates, delivery reports, and forwarded replies. */
export const msg91: ProviderAdapter = {
  name: 'msg91',
  label: 'MSG91',
  channels: ['sms'],
  fieldText: {
    sender: {
      label: { en: 'Sender id (DLT header)', hi: 'सेंडर आईडी (DLT हेडर)' },
      hint_hi: 'DLT में पंजीकृत सेंडर आईडी (हेडर), जैसे CMPGNS।',
    },
    otp_template_id: {
      label: { en: "OTP template's Flow id", hi: 'OTP टेम्पलेट की Flow आईडी' },
      hint_hi: 'DLT में पंजीकृत OTP टेम्पलेट की Flow आईडी (##otp##, ##minutes##): साइन-इन कोड इसी से जाते हैं।',
    },
    authkey: { label: { en: 'Auth key', hi: 'ऑथ की (authkey)' }, hint_hi: 'खाते की authkey।' },
  },
  templatesOnly: ['sms'],
  settings: Type.Object({
    sender: Type.String({
      minLength: 1,
      maxLength: 500,
      description: 'The DLT-registered sender id (header), e.g. CMPGNS.',
    }),
    otp_template_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 500,
        description:
          'The Flow id of a DLT-registered OTP template (##otp##, ##minutes##): sign-in codes go through it.',
      }),
    ),
  }),
  credentials: Type.Object({
    authkey: Type.String({
      minLength: 1,
      maxLength: 2000,
      pattern: '^\\S+$',
      description: "The account's authkey.",
    }),
  }),
  callbacks: ['delivery', 'inbound'],
  templates: {
    sends: 'only',
    idLabel: "The template's id in the MSG91 panel (Flow)",
    idLabelHi: 'MSG91 पैनल में टेम्पलेट की आईडी (Flow)',
    maxLength: 64,
  },
  otpTemplateSetting: 'otp_template_id',
  api: { env: 'MSG91_BASE_URL', url: 'https://control.msg91.com' },
  errorFor,
  redact: [],
  create: (c) =>
    new Msg91Provider({
      baseUrl: c.apiUrl,
      authkey: c.credentials.authkey ?? '',
      sender: String(c.settings.sender ?? ''),
    }),
  callback(request: CallbackRequest) {
    if (request.kind === 'inbound') {
      const reply = msg91Inbound({ ...request.query, ...request.fields });
      return { replies: reply ? [{ channel: 'sms', ...reply }] : [], answer: emptyText(request) };
    }
    // A Flow request's id covers every number it carried: each report is its id and number.
    return {
      reports: msg91Reports(request.body).map((report) => ({
        providerMessageId: report.requestId,
        to: `+${report.number.replace(/^\+/, '')}`,
        outcome: msg91Outcome(report),
      })),
    };
  },
};

/** GET forwards are answered with an empty text (no automatic reply); POSTs with the usual envelope. */
const emptyText = (request: CallbackRequest) =>
  request.method === 'GET' ? { type: 'text/plain', body: '' } : undefined;
