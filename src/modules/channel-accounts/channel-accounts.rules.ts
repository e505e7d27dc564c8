import type { AccountProvider, MessageChannel } from '../../domain.ts';
import type { FieldErrors } from '../../errors.ts';

export type SettingValue = string | number | boolean;
type Kind = 'text' | 'port' | 'flag';

interface ProviderSpec {
  /** The channels the provider serves. */
  channels: readonly MessageChannel[];
  /** Non-secret settings: name -> [kind, required]. */
  settings: Record<string, [Kind, boolean]>;
  /** Secret credentials: name -> required. */
  credentials: Record<string, boolean>;
  /** The keys of callback_urls. */
  callbacks: readonly CallbackKind[];
}

export const callbackKinds = ['delivery', 'call_status', 'greeting', 'webhook', 'inbound'] as const;
export type CallbackKind = (typeof callbackKinds)[number];

/** What each provider's account is made of (contract, third part, "The providers Indian offices use"). */
export const providerSpecs: Record<AccountProvider, ProviderSpec> = {
  msg91: {
    channels: ['sms'],
    // otp_template_id: the Flow of a DLT-registered OTP template (##otp##, ##minutes##) for sign-in codes.
    settings: { sender: ['text', true], otp_template_id: ['text', false] },
    credentials: { authkey: true },
    callbacks: ['delivery', 'inbound'],
  },
  exotel: {
    channels: ['sms', 'ivr'],
    settings: {
      sid: ['text', true],
      sender: ['text', true],
      caller_id: ['text', false],
      app_id: ['text', false],
      dlt_entity_id: ['text', false],
    },
    credentials: { api_key: true, api_token: true },
    callbacks: ['delivery', 'call_status', 'greeting', 'inbound'],
  },
  whatsapp_cloud: {
    channels: ['whatsapp'],
    settings: { phone_number_id: ['text', true], waba_id: ['text', false] },
    credentials: { access_token: true, app_secret: true },
    callbacks: ['webhook'],
  },
  twilio: {
    channels: ['sms', 'whatsapp', 'ivr'],
    settings: {
      account_sid: ['text', true],
      sms_from: ['text', false],
      whatsapp_from: ['text', false],
      voice_from: ['text', false],
    },
    credentials: { auth_token: true },
    callbacks: ['delivery'],
  },
  smtp: {
    channels: ['email'],
    settings: { host: ['text', true], port: ['port', false], secure: ['flag', false], from: ['text', true] },
    credentials: { username: false, password: false },
    callbacks: [],
  },
  sandbox: { channels: ['sms', 'whatsapp', 'email', 'ivr'], settings: {}, credentials: {}, callbacks: [] },
};

/** Settings an account needs for one of its channels beyond the provider's required ones. */
const channelSettings: Partial<Record<AccountProvider, Partial<Record<MessageChannel, string[]>>>> = {
  exotel: { ivr: ['caller_id', 'app_id'] },
  twilio: { sms: ['sms_from'], whatsapp: ['whatsapp_from'], ivr: ['voice_from'] },
};

const MAX_TEXT = 500;

/** Checks an account's whole settings and credentials (after a PATCH's merge); problems name `settings.x`. */
export function checkAccount(
  provider: AccountProvider,
  channels: readonly MessageChannel[],
  settings: Record<string, unknown>,
  credentials: Record<string, unknown>,
  errors: FieldErrors,
): void {
  const spec = providerSpecs[provider];
  const served = spec.channels;
  const foreign = channels.filter((c) => !served.includes(c));
  if (channels.length === 0) errors.channels = [`must name at least one of ${served.join(', ')}.`];
  else if (foreign.length > 0)
    errors.channels = [`${provider} serves ${served.join(', ')}; it cannot carry ${foreign.join(', ')}.`];
  for (const [name, value] of Object.entries(settings)) {
    // Own keys only: `constructor`, `valueOf` and the other names every object inherits are not settings.
    const rule = Object.hasOwn(spec.settings, name) ? spec.settings[name] : undefined;
    const field = `settings.${name}`;
    if (!rule) {
      const known = Object.keys(spec.settings);
      errors[field] = [
        known.length > 0
          ? `is not a setting of ${provider}: its settings are ${known.join(', ')}.`
          : `is not a setting: ${provider} accounts have none.`,
      ];
    } else if (
      rule[0] === 'text' &&
      (typeof value !== 'string' || value.trim() === '' || value.length > MAX_TEXT)
    )
      errors[field] = [`must be text of 1 to ${MAX_TEXT} characters.`];
    else if (
      rule[0] === 'port' &&
      !(Number.isInteger(value) && (value as number) >= 1 && (value as number) <= 65535)
    )
      errors[field] = ['must be a port number from 1 to 65535.'];
    else if (rule[0] === 'flag' && typeof value !== 'boolean') errors[field] = ['must be true or false.'];
  }
  const needed = [
    ...Object.entries(spec.settings)
      .filter(([, [, required]]) => required)
      .map(([name]) => name),
    ...channels.flatMap((c) => channelSettings[provider]?.[c] ?? []),
  ];
  for (const name of needed) {
    if (settings[name] === undefined && !errors[`settings.${name}`]) {
      const why = spec.settings[name]?.[1]
        ? ''
        : ` for ${channels.filter((c) => channelSettings[provider]?.[c]?.includes(name)).join(' and ')}`;
      errors[`settings.${name}`] = [`is required${why} on a ${provider} account.`];
    }
  }
  for (const [name, value] of Object.entries(credentials)) {
    const field = `credentials.${name}`;
    if (!Object.hasOwn(spec.credentials, name)) {
      const known = Object.keys(spec.credentials);
      errors[field] = [
        known.length > 0
          ? `is not a credential of ${provider}: its credentials are ${known.join(', ')}.`
          : `is not a credential: ${provider} accounts have none.`,
      ];
    } else if (
      typeof value !== 'string' ||
      value.trim() === '' ||
      value.length > 2000 ||
      (/\s/.test(value.trim()) && name !== 'password')
    )
      errors[field] = ['must be the secret as text, without spaces (1 to 2,000 characters).'];
  }
  for (const [name, required] of Object.entries(spec.credentials)) {
    if (required && credentials[name] === undefined && !errors[`credentials.${name}`])
      errors[`credentials.${name}`] = [`is required on a ${provider} account.`];
  }
}

export const accountRef = (id: number) => `cha_${id}`;
