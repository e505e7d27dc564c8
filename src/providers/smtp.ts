import nodemailer, { type Transporter } from 'nodemailer';
import type { SmtpSettings } from '../config.ts';
import { type MessageProvider, type OutgoingMessage, ProviderError, type SendResult } from './provider.ts';

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
      const permanent = typeof code === 'number' && code >= 500;
      // 550/551/553: no such mailbox or a malformed address; any other 5xx is the server refusing the email.
      const recipient = code === 550 || code === 551 || code === 553;
      // 535 (or nodemailer's EAUTH): the server refused the username and password.
      const auth = code === 535 || (error as { code?: string }).code === 'EAUTH';
      throw new ProviderError(
        `SMTP: ${(error as Error).message}`.slice(0, 300),
        !permanent && !auth,
        auth ? 'auth_failed' : recipient ? 'invalid_recipient' : 'provider_rejected',
      );
    }
  }

  close(): void {
    this.transport.close();
  }
}
