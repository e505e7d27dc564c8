import type { FastifyBaseLogger } from 'fastify';
import type { TObject } from 'typebox';
import type { Channel, ErrorVerdict, FinalStatus, MessageProvider, ReportOutcome } from './provider.ts';

export type { ErrorVerdict } from './provider.ts';

/**
 * Everything the service knows about one provider, in one module (`src/providers/<name>/`): its settings and
 * credentials, how it sends, how its callbacks are verified and read, how its error codes map, and how its
 * texts are cleaned for logs. Nothing outside the provider's folder and `registry.ts` names a provider; the
 * channel accounts, the callback routes, the configuration and the console read these declarations.
 */
export interface ProviderAdapter {
  /** The `provider` value of a channel account, and the path segment of its callback URLs. */
  readonly name: string;
  /** How people name it, as its own documentation does. */
  readonly label: string;
  readonly channels: readonly Channel[];
  /**
   * The account's non-secret settings, and its secret credentials, as TypeBox objects: the API's validation,
   * the OpenAPI document (`GET /api/channel-accounts/providers`) and the console's form all come from these.
   * Settings are text (`Type.String`), whole numbers (`Type.Integer`) or flags (`Type.Boolean`); credentials
   * are text.
   */
  readonly settings: TObject;
  readonly credentials: TObject;
  /** Settings a channel needs beyond the required ones (an account is for that channel only with them). */
  readonly channelSettings?: Partial<Record<Channel, readonly string[]>>;
  /**
   * Each setting's and credential's name as an office reads it, in English and Hindi, and its hint in Hindi (the
   * English hint is the field's `description`): the console's set-up speaks both languages (fifth part).
   */
  readonly fieldText?: Readonly<Record<string, FieldText>>;
  /** The kinds of callback URL an account of this provider has (`callback_urls`). */
  readonly callbacks: readonly CallbackKind[];
  /**
   * Providers that keep templates of their own: `provider_template_ids.<name>` on our templates holds the
   * template's id there. `only`: it sends nothing else (a message through it needs such a template).
   */
  readonly templates?: {
    readonly sends: 'only' | 'also';
    /** What the id is there (the API's description and the console's label), and the same in Hindi. */
    readonly idLabel: string;
    readonly idLabelHi?: string;
    readonly maxLength: number;
  };
  /**
   * The channels on which its accounts send templates only (contract, fifth part): a DLT gateway's SMS
   * (its registered templates), WhatsApp outside the 24-hour window (a session opens only with an approved template). Every SMS
   * is templates-only besides while DLT_ENFORCE is on (sendsTemplatesOnly).
   */
  readonly templatesOnly?: readonly Channel[];
  /** The setting that names the template its sign-in codes go through, where it sends templates only. */
  readonly otpTemplateSetting?: string;
  /**
   * IVR surveys: the setting that names the call flow a survey call is connected to, whose applets ask the
   * account's `survey_gather` callback for each question and bring the keys to `survey_answer`
   * (docs/providers.md). Without it, the provider's accounts carry no IVR survey.
   */
  readonly surveyFlowSetting?: string;
  /**
   * It reaches no phone or inbox (`simulated: true` on the workspace's channels and campaigns), and has no
   * reports of its own: its sent messages end by age (SANDBOX_DELIVERY_DELAY_MS), as `settles` says of each.
   */
  readonly simulated?: { settles(to: string): FinalStatus };
  /** It sends no delivery reports (a mail server): an accepted message stays `sent`, and that is final. */
  readonly noDeliveryReports?: boolean;
  /** Its webhook is verified with a token we issue (`verify_token` on the account). */
  readonly verifyToken?: boolean;
  /** Where its API is, and the environment variable that moves it (regional endpoints, test doubles). */
  readonly api?: { readonly env: string; readonly alias?: string; readonly url: string };
  /** Further environment settings of the provider (a pinned API version): name -> [default, pattern]. */
  readonly env?: Readonly<Record<string, readonly [string, RegExp, string]>>;
  /** As the deployment's provider of a channel (SMS_PROVIDER=<name>): the environment that configures it. */
  readonly deployment?: DeploymentSpec;
  /**
   * Its error table: an answer's status and code in, our `error_code` and whether (and when) to retry out.
   * A provider that never answers with an error (the sandbox) has none.
   */
  readonly errorFor?: (answer: ProviderAnswerFacts) => ErrorVerdict;
  /** Patterns of its texts that must not reach a log line or an `error_message` (numbers in its own form). */
  readonly redact: readonly RegExp[];
  /** The provider of one channel of an account (or of the deployment). */
  create(context: BuildContext): MessageProvider;
  /** Reads one callback request: throws CallbackRefused when its signature or token does not hold. */
  callback?(request: CallbackRequest): CallbackResult | Promise<CallbackResult>;
  /**
   * Renders the service's answer to a call's step (`speak`, `survey` in its CallbackResult) in the provider's own
   * format: a call flow's text, a question's JSON, a step's status, XML. A provider whose callbacks
   * carry no call step has none.
   */
  answerCall?(answer: CallAnswer): CallbackAnswer;
}

/**
 * What the service answers a call's step with, in no provider's format:
 * - `say`: the text of an IVR message;
 * - `ask`: a survey's question (or its closing words, with `digits` 1 and no repeat), the most keys to take, how
 *   long to wait for them, and how many times to ask again;
 * - `answered`: the keys were taken; `more` while questions remain;
 * - `missed_call`: whether the call started a survey.
 */
export type CallAnswer =
  | { kind: 'say'; text: string }
  | {
      kind: 'ask';
      prompt: { text: string } | { audio_url: string };
      digits: number;
      waitSeconds: number;
      repeats: number;
    }
  | { kind: 'answered'; more: boolean }
  | { kind: 'missed_call'; started: boolean };

/** A callback's answer in the provider's format: a status (200 unless given), a content type and a body. */
export interface CallbackAnswer {
  status?: number;
  type: string;
  body: string;
}

export interface FieldText {
  label: { en: string; hi: string };
  /** The hint in Hindi (the English one is the field's description). */
  hint_hi?: string;
}

export const callbackKinds = [
  'delivery',
  'call_status',
  'greeting',
  'webhook',
  'inbound',
  'status',
  /** An IVR survey's Gather applet asks for the question; its Passthru brings the keys; a missed call. */
  'survey_gather',
  'survey_answer',
  'missed_call',
] as const;
export type CallbackKind = (typeof callbackKinds)[number];

export interface DeploymentSpec {
  /** `<PREFIX>_...` names its variables; each setting or credential is read from `<PREFIX>_<NAME>`. */
  readonly prefix: string;
  /** Environment names that differ from `<PREFIX>_<NAME>` (setting or credential name -> variable). */
  readonly names?: Readonly<Record<string, string>>;
  /** The deployment's callbacks (`/api/providers/<name>/<kind>`), checked with the deployment's credentials. */
  readonly callbacks: readonly CallbackKind[];
}

/** What a provider answered, as its error table reads it. */
export interface ProviderAnswerFacts {
  /** HTTP status, or a mail server's reply code. */
  status: number;
  /** The provider's own error code, where it gave one. */
  code?: string | undefined;
  /** Its text (some codes are told apart by it). */
  text?: string | undefined;
  /** A 429's or 503's Retry-After, in ms. */
  retryAfterMs?: number | undefined;
}

export interface BuildContext {
  channel: Channel;
  settings: Readonly<Record<string, string | number | boolean>>;
  credentials: Readonly<Record<string, string>>;
  /** Its API base URL (the `api` declaration's variable, or its default). */
  apiUrl: string;
  /** Values of its `env` declarations. */
  env: Readonly<Record<string, string>>;
  /** The account's callback URL of a kind (with its secret token), or the deployment's. */
  callbackUrl(kind: CallbackKind): string;
  /** PROVIDER_TIMEOUT_MS. */
  timeoutMs: number;
  log: FastifyBaseLogger;
  /** SANDBOX_DELIVERY_DELAY_MS. */
  sandboxDelayMs: number;
  /** A workspace's own account (true) or the deployment's provider (false). */
  ownAccount: boolean;
}

export interface CallbackRequest {
  kind: CallbackKind;
  method: 'GET' | 'POST';
  /** The body as sent (signatures are over it), and as read: JSON, or form fields. */
  raw: string;
  body: unknown;
  /** The body's fields as text (form or flat JSON), and the query's. */
  fields: Readonly<Record<string, string>>;
  query: Readonly<Record<string, string>>;
  header(name: string): string | undefined;
  /** The URL the provider called, as it signs it: PUBLIC_BASE_URL with the path and query. */
  url: string;
  /** The account's (or the deployment's) credentials and settings, and its verify token. */
  credentials: Readonly<Record<string, string>>;
  verifyToken: string | undefined;
}

/** One report in a callback: its message by our id, or by the provider's id (and number, where one id is many). */
export interface CallbackReport {
  messageRef?: string | undefined;
  providerMessageId?: string | undefined;
  to?: string | undefined;
  outcome: ReportOutcome | undefined;
  /** The provider says the recipient told it to stop sending (a STOP at its end): an opt-out. */
  optOut?: boolean;
}

export interface CallbackReply {
  channel: Channel;
  /** The sender in E.164 (+ and digits) or as the provider wrote it; normalised by the inbound service. */
  from: string;
  body: string;
  /** The provider's id of the reply (a repeat is kept once). */
  id: string;
  name?: string | undefined;
}

export interface CallbackResult {
  reports?: CallbackReport[];
  replies?: CallbackReply[];
  /** An IVR call asks for its text: our message id and the provider's call id. */
  speak?: { messageRef: string; callId: string | undefined };
  /** An IVR survey's step: the Gather asks for the question, the Passthru brings the keys, or a missed call. */
  survey?:
    | { step: 'gather'; messageRef: string; callId: string | undefined }
    | { step: 'answer'; messageRef: string; callId: string | undefined; digits: string }
    | { step: 'missed_call'; from: string };
  /** Answer with this body instead of the JSON envelope (a challenge, an empty XML or text reply). */
  answer?: CallbackAnswer;
}

/** A callback whose signature, token or challenge does not hold: 401 (403 on the deployment's), nothing applied. */
export class CallbackRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CallbackRefused';
  }
}

/** The common part of every error table: throttling and outages are retried, after Retry-After where given. */
export function httpVerdict(answer: ProviderAnswerFacts): ErrorVerdict | undefined {
  if (answer.status === 429)
    return { error_code: 'rate_limited', retry: true, after_ms: answer.retryAfterMs };
  if (answer.status >= 500)
    return { error_code: 'provider_rejected', retry: true, after_ms: answer.retryAfterMs };
  return undefined;
}

/** Text fields of a JSON object or form (other values as text). */
export function fieldsOf(value: unknown): Record<string, string> {
  return value && typeof value === 'object' && !Array.isArray(value)
    ? Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([k, v]) => [
          k,
          v === null || v === undefined ? '' : typeof v === 'object' ? JSON.stringify(v) : String(v),
        ]),
      )
    : {};
}

interface FieldSchema {
  type?: string;
  minLength?: number;
  maxLength?: number;
  pattern?: string;
  minimum?: number;
  maximum?: number;
}

/** The fields of a settings or credentials schema: name -> [schema, required]. */
export function fieldsOfSchema(schema: TObject): Array<[string, FieldSchema, boolean]> {
  const required = new Set<string>(schema.required ?? []);
  return Object.entries(schema.properties as Record<string, FieldSchema>).map(([name, field]) => [
    name,
    field,
    required.has(name),
  ]);
}

/**
 * A field's value from text (an environment variable): a number for an integer field, true or false for a
 * boolean one (1/true/yes, 0/false/no); anything else as given, for fieldProblem to refuse.
 */
export function fieldFromText(field: FieldSchema, raw: string): string | number | boolean {
  if (field.type === 'integer') return Number(raw);
  if (field.type !== 'boolean') return raw;
  const word = raw.toLowerCase();
  if (['1', 'true', 'yes'].includes(word)) return true;
  if (['0', 'false', 'no'].includes(word)) return false;
  return raw;
}

/** What is wrong with a value of a field (as a sentence that tells the caller what to give), or undefined. */
export function fieldProblem(field: FieldSchema, value: unknown): string | undefined {
  if (field.type === 'integer') {
    const min = field.minimum ?? 0;
    const max = field.maximum ?? Number.MAX_SAFE_INTEGER;
    return Number.isInteger(value) && (value as number) >= min && (value as number) <= max
      ? undefined
      : `must be a whole number from ${min} to ${max}.`;
  }
  if (field.type === 'boolean') return typeof value === 'boolean' ? undefined : 'must be true or false.';
  const max = field.maxLength ?? 500;
  const spaces = field.pattern !== undefined && !new RegExp(field.pattern).test('a b');
  const fits =
    typeof value === 'string' &&
    value.trim() !== '' &&
    value.length <= max &&
    (field.pattern === undefined || new RegExp(field.pattern).test(value));
  if (fits) return undefined;
  return spaces
    ? `must be text without spaces, 1 to ${max.toLocaleString('en')} characters.`
    : `must be text of 1 to ${max.toLocaleString('en')} characters.`;
}

/** Whether a channel of this provider's accounts sends templates only (`templates_only` on the API). */
export function sendsTemplatesOnly(adapter: ProviderAdapter, channel: Channel, dltEnforce: boolean): boolean {
  return (adapter.templatesOnly?.includes(channel) ?? false) || (channel === 'sms' && dltEnforce);
}
