import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { authOf, limitRequest } from '../../http/guard.ts';
import type { RateLimits } from '../../http/rate-limit.ts';
import { Done, IdParams, Page, PageQuery, Success } from '../../http/schemas.ts';
import { toE164 } from '../../lib/phone.ts';
import { actorOf } from '../audit/audit.repository.ts';
import type { AuthService } from './auth.service.ts';
import {
  AccessToken,
  AuthResult,
  ChangePasswordBody,
  CurrentUser,
  ResetPasswordBody,
  LoginBody,
  RegisterBody,
  SendOtpBody,
  SendOtpResult,
  VerifyOtpBody,
} from './auth.schemas.ts';

export interface AuthRoutesOptions {
  auth: AuthService;
  rateLimits: RateLimits;
  defaultCountry: string;
}

/**
 * Sign-in and sign-up: 60 a minute per client address (in the guard: an office behind one address is not locked
 * out by one person's mistakes) and RATE_LIMIT_AUTH_PER_MIN per email, here.
 */
function limitPerAccount({ rateLimits }: AuthRoutesOptions) {
  return async (request: { body: { email?: string } }, reply: Parameters<typeof limitRequest>[1]) => {
    const email = typeof request.body.email === 'string' ? request.body.email.trim().toLowerCase() : '';
    await limitRequest(rateLimits, reply, 'auth', `email:${email}`);
  };
}

/** OTP routes are limited per client address (in the guard) and, here, per phone number as well. */
function limitPerPhone({ rateLimits, defaultCountry }: AuthRoutesOptions) {
  return async (request: { body: { phone: string } }, reply: Parameters<typeof limitRequest>[1]) => {
    const phone = toE164(request.body.phone, defaultCountry) ?? request.body.phone.trim().toLowerCase();
    await limitRequest(rateLimits, reply, 'otp', `phone:${phone}`);
  };
}

const tags = ['Authentication'];

export const authRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, deps) => {
  for (const routes of [signInRoutes, otpRoutes, currentUserRoutes]) await routes(app, deps);
};

const signInRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, deps) => {
  const { auth } = deps;
  app.post(
    '/auth/register',
    {
      config: { permission: 'public', rateLimit: 'authIp' },
      preHandler: limitPerAccount(deps),
      schema: {
        tags,
        summary: 'Create a workspace and its first user (role politician), and sign in',
        description:
          'With REGISTRATION=closed this is 403 `forbidden`: operators create workspaces with the CLI.',
        body: RegisterBody,
        response: { 201: Success(AuthResult) },
      },
    },
    async (request, reply) => {
      const data = await auth.register(request.body, actorOf(request));
      return reply.code(201).send({ success: true, message: 'Registration successful.', data });
    },
  );

  app.post(
    '/auth/login',
    {
      config: { permission: 'public', rateLimit: 'authIp' },
      preHandler: limitPerAccount(deps),
      schema: {
        tags,
        summary: 'Sign in with email and password',
        body: LoginBody,
        response: { 200: Success(AuthResult) },
      },
    },
    async (request) => {
      const data = await auth.login(request.body.email, request.body.password);
      return { success: true as const, message: 'Login successful.', data };
    },
  );

  app.post(
    '/auth/logout',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags,
        summary: 'Revoke the token that made this call',
        response: { 200: Done },
      },
    },
    async (request) => {
      await auth.logout(authOf(request));
      return { success: true as const, message: 'Logged out; this token no longer works.' };
    },
  );
};

const otpRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, deps) => {
  const { auth } = deps;
  app.post(
    '/auth/send-otp',
    {
      config: { permission: 'public', rateLimit: 'otp' },
      preHandler: limitPerPhone(deps),
      schema: {
        tags,
        summary: 'Send a 6-digit sign-in code by SMS',
        description:
          'Answers the same whether or not the phone belongs to an account. The code lives OTP_TTL_SECONDS, ' +
          'allows OTP_MAX_ATTEMPTS wrong tries and works once.',
        body: SendOtpBody,
        response: { 200: Success(SendOtpResult) },
      },
    },
    async (request) => {
      const data = auth.sendOtp(request.body.phone);
      return {
        success: true as const,
        message: 'If this phone number belongs to an account, a sign-in code has been sent to it.',
        data,
      };
    },
  );

  app.post(
    '/auth/verify-otp',
    {
      config: { permission: 'public', rateLimit: 'otp' },
      preHandler: limitPerPhone(deps),
      schema: {
        tags,
        summary: 'Sign in with the code sent by send-otp',
        body: VerifyOtpBody,
        response: { 200: Success(AuthResult) },
      },
    },
    async (request) => {
      const data = await auth.verifyOtp(request.body.phone, request.body.otp);
      return { success: true as const, message: 'Login successful.', data };
    },
  );

  app.post(
    '/auth/reset-password',
    {
      config: { permission: 'public', rateLimit: 'otp' },
      preHandler: limitPerPhone(deps),
      schema: {
        tags,
        summary: 'Set a new password with the code sent by send-otp, and sign in',
        description:
          'The code follows the verify-otp rules (OTP_TTL_SECONDS, OTP_MAX_ATTEMPTS, single use). A right code ' +
          'sets the password, revokes every token of the user and answers as login; anything else is 401 as ' +
          'verify-otp. A weak password is 422 and leaves the code usable.',
        body: ResetPasswordBody,
        response: { 200: Success(AuthResult) },
      },
    },
    async (request) => {
      const data = await auth.resetPassword(request.body, actorOf(request));
      return { success: true as const, message: 'Password changed; you are signed in.', data };
    },
  );
};

const currentUserRoutes: FastifyPluginAsyncTypebox<AuthRoutesOptions> = async (app, { auth }) => {
  app.post(
    '/user/password',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Change your password',
        description:
          'A wrong `current_password` is 422 naming it. Success revokes every other token of yours and keeps ' +
          'the one that made this call.',
        body: ChangePasswordBody,
        response: { 200: Done },
      },
    },
    async (request) => {
      await auth.changePassword(authOf(request), request.body, actorOf(request));
      return { success: true as const, message: 'Password changed; your other sessions were signed out.' };
    },
  );

  app.get(
    '/user/tokens',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Your live access tokens (sessions), newest first',
        querystring: PageQuery,
        response: { 200: Success(Page(AccessToken)) },
      },
    },
    async (request) => ({
      success: true as const,
      data: await auth.listTokens(authOf(request), request.query.page, request.query.per_page),
    }),
  );

  app.delete(
    '/user/tokens/:id',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: 'Revoke one of your tokens (sign that session out)',
        description: "Another user's token id, or one already revoked or expired, is 404.",
        params: IdParams,
        response: { 200: Done },
      },
    },
    async (request) => {
      await auth.revokeOwnToken(authOf(request), request.params.id);
      return { success: true as const, message: 'Token revoked.' };
    },
  );

  app.get(
    '/user',
    {
      config: { permission: 'authenticated' },
      schema: {
        tags: ['Users'],
        summary: "The signed-in user and their workspace's credits",
        response: { 200: Success(CurrentUser) },
      },
    },
    async (request) => ({ success: true as const, data: await auth.currentUser(authOf(request)) }),
  );
};
