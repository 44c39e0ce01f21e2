import type { ConnectRouter } from "@connectrpc/connect";
import { NotificationService } from "../../gen/relay/v1/notifications_pb.ts";
import * as notifications from "../api/notifications.ts";
import type { ContextOf } from "./caller.ts";
import { ts } from "./convert.ts";

const notificationsOut = (n: notifications.NotificationsView) => ({
  url: n.url,
  createdAt: ts(n.createdAt),
});

export function notificationService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(NotificationService, {
    async getNotifications(req, h) {
      const settings = await notifications.getNotifications(ctxOf(h), req.project);
      return { notifications: notificationsOut(settings) };
    },
    async setNotifications(req, h) {
      const set = await notifications.setNotifications(ctxOf(h), req.project, { url: req.url });
      return { notifications: notificationsOut(set), secret: set.secret };
    },
    async rotateNotificationSecret(req, h) {
      const rotated = await notifications.rotateNotificationSecret(ctxOf(h), req.project);
      return { notifications: notificationsOut(rotated), secret: rotated.secret };
    },
    async deleteNotifications(req, h) {
      await notifications.deleteNotifications(ctxOf(h), req.project);
      return {};
    },
  });
}
