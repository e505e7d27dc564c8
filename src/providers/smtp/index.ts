import nodemailer, { type Transporter } from 'nodemailer';
import { Type } from 'typebox';
import type { ErrorVerdict, ProviderAdapter, ProviderAnswerFacts } from '../adapter.ts';
import { providerText } from '../http.ts';
import { type MessageProvider, type OutgoingMessage, ProviderError, type SendResult } from '../provider.ts';

export interface SmtpSettings {
  readonly host: string;
  readonly port: number;
  readonly secure: boolean;
  readonly user: string | undefined;
  readonly password: string | undefined;
  readonly from: string;
}

/**
 * Email through any SMTP server (nodemailer, pooled connections). A 5xx answer is a refusal; a 4xx answer
 * or a connection problem is retried. SMTP has no delivery report: an accepted email stays `sent`.
 */
export class SmtpProvider implements MessageProvider {
  readonly name = 'smtp';
  readonly channel = 'email' as const;
  private readonly transport: Transporter;

  /** `timeoutMs` bounds connecting, the server's greeting and each wait on the socket (PROVIDER_TIMEOUT_MS). */
  constructor(
    private readonly settings: SmtpSettings,
    timeoutMs = 10_000,
  ) {
    this.transport = nodemailer.createTransport({
      connectionTimeout: timeoutMs,
      greetingTimeout: timeoutMs,
      socketTimeout: timeoutMs,
      host: settings.host,
      port: settings.port,
      secure: settings.secure,
      pool: true,
      maxConnections: 4,
      ...(settings.user ? { auth: { user: settings.user, pass: settings.password ?? '' } } : {}),
    });
  }

  async send(message: OutgoingMessage): Promise<SendResult> {
    try {
      const info = (await this.transport.sendMail({
        from: this.settings.from,
        to: message.to,
        subject: message.subject ?? '',
        text: message.body,
        textEncoding: 'base64',
        headers: {
          ...message.headers,
          ...(message.reference ? { 'X-Message-Reference': message.reference } : {}),
        },
      })) as { messageId: string };
      return { providerMessageId: info.messageId };
    } catch (error) {
      const code = (error as { responseCode?: number }).responseCode;
      // nodemailer's EAUTH is the server refusing the username and password, whatever its code.
      const status = (error as { code?: string }).code === 'EAUTH' ? 535 : (code ?? 0);
      throw ProviderError.of(`SMTP: ${providerText((error as Error).message)}`, errorFor({ status }));
    }
  }

  close(): void {
    this.transport.close();
  }
}

/**
 * SMTP reply codes (RFC 5321): 535 refuses the credentials; 550, 551 and 553 name a mailbox that does not exist
 * or an address that is malformed; any other 5xx refuses the email; a 4xx, or no answer (0), is retried.
 */
function errorFor(answer: ProviderAnswerFacts): ErrorVerdict {
  if (answer.status === 535) return { error_code: 'auth_failed', retry: false };
  if ([550, 551, 553].includes(answer.status)) return { error_code: 'invalid_recipient', retry: false };
  if (answer.status >= 500) return { error_code: 'provider_rejected', retry: false };
  return { error_code: 'provider_rejected', retry: true };
}

/** Email through any SMTP server, for an account or as the deployment's EMAIL_PROVIDER. */
export const smtp: ProviderAdapter = {
  name: 'smtp',
  label: 'SMTP',
  channels: ['email'],
  fieldText: {
    host: { label: { en: 'SMTP server', hi: 'SMTP सर्वर' }, hint_hi: 'SMTP सर्वर।' },
    port: { label: { en: 'Port', hi: 'पोर्ट' }, hint_hi: 'डिफ़ॉल्ट 587।' },
    secure: {
      label: { en: 'TLS from the start', hi: 'शुरू से TLS' },
      hint_hi: 'पहली बाइट से TLS (पोर्ट 465); डिफ़ॉल्ट false (STARTTLS)।',
    },
    from: { label: { en: 'From address', hi: 'भेजने वाले का पता' }, hint_hi: 'हर ईमेल का From पता।' },
    username: { label: { en: 'User name', hi: 'यूज़र नाम' } },
    password: { label: { en: 'Password', hi: 'पासवर्ड' } },
  },
  settings: Type.Object({
    host: Type.String({ minLength: 1, maxLength: 500, description: 'The SMTP server.' }),
    port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535, description: 'Default 587.' })),
    secure: Type.Optional(
      Type.Boolean({ description: 'TLS from the first byte (port 465); default false (STARTTLS).' }),
    ),
    from: Type.String({ minLength: 1, maxLength: 500, description: 'The From address of every email.' }),
  }),
  credentials: Type.Object({
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 2000, pattern: '^\\S+$' })),
    password: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
  }),
  callbacks: [],
  noDeliveryReports: true,
  deployment: { prefix: 'SMTP', names: { username: 'SMTP_USER' }, callbacks: [] },
  errorFor,
  redact: [],
  create: (c) =>
    new SmtpProvider(
      {
        host: String(c.settings.host ?? ''),
        port: typeof c.settings.port === 'number' ? c.settings.port : 587,
        secure: c.settings.secure === true,
        user: c.credentials.username,
        password: c.credentials.password,
        from: String(c.settings.from ?? ''),
      },
      c.timeoutMs,
    ),
};
