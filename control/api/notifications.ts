/**
 * A project's notification URL, where Relay posts its operational events signed with the
 * project's secret. The URL is checked as a target URL is (never the relay itself, so an event
 * cannot loop through it); the secret is made by the first set and shown then, and by each
 * rotation, and never readable again. Owners and editors manage it.
 */
import { z } from "zod";
import { RelayError } from "../../core/errors.ts";
import * as store from "../../store/notifications.ts";
import { type Ctx, projectAccess } from "./context.ts";
import { allowedUrls, parseInput, postedUrl } from "./validation.ts";

export type NotificationsView = store.NotificationSettings;

/** The settings, with the `whsec_...` secret only in the answer that made it. */
export interface NotificationsWithSecret extends NotificationsView {
  secret?: string;
}

export const notificationsBody = z.strictObject({
  url: postedUrl,
});

export async function getNotifications(ctx: Ctx, slug: string): Promise<NotificationsView> {
  const access = await projectAccess(ctx, slug);
  const settings = await store.notificationSettings(ctx.sql, access.projectId);
  if (!settings) throw noUrl(slug);
  return settings;
}

/** Sets the URL; the first set answers the new secret, a later one keeps it and does not. */
export async function setNotifications(
  ctx: Ctx,
  slug: string,
  input: unknown,
): Promise<NotificationsWithSecret> {
  const access = await projectAccess(ctx, slug);
  const { url } = parseInput(
    notificationsBody.superRefine(allowedUrls(ctx.targetRules, ({ url }) => [[["url"], url]])),
    input,
  );
  const set = await store.setNotificationUrl(
    ctx.sql,
    ctx.sealingKey,
    access.projectId,
    url,
    ctx.now(),
  );
  const view = { url: set.url, createdAt: set.createdAt };
  return set.secret === null ? view : { ...view, secret: set.secret };
}

/** A new secret, shown this once; the old one signs nothing from now on. */
export async function rotateNotificationSecret(
  ctx: Ctx,
  slug: string,
): Promise<Required<NotificationsWithSecret>> {
  const access = await projectAccess(ctx, slug);
  const rotated = await store.rotateNotificationSecret(ctx.sql, ctx.sealingKey, access.projectId);
  if (!rotated) throw noUrl(slug);
  return rotated;
}

export async function deleteNotifications(ctx: Ctx, slug: string): Promise<void> {
  const access = await projectAccess(ctx, slug);
  if (!(await store.deleteNotificationSettings(ctx.sql, access.projectId))) throw noUrl(slug);
}

function noUrl(slug: string): RelayError {
  return new RelayError("not_found", `project '${slug}' has no notification URL`);
}
