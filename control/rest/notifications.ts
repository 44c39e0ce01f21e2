/**
 * The Notifications routes (where Relay posts its events): each REST contract beside the operation
 * it calls, as control/connect/notifications.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as notifications from "../api/notifications.ts";
import { base, p, type Route, route, tagged } from "./contract.ts";

export const notificationRoutes: Route[] = tagged("Notifications", [
  route(
    "GET",
    `${base}/notifications`,
    {
      operationId: "getNotifications",
      summary: "The project's notification URL (404 while none is set)",
      access: "editor",
      answer: answers.notifications,
    },
    ({ ctx, params }) => notifications.getNotifications(ctx, p(params).project),
  ),
  route(
    "PUT",
    `${base}/notifications`,
    {
      operationId: "setNotifications",
      summary: "Set the notification URL; the first set answers its secret, once",
      access: "editor",
      body: notifications.notificationsBody,
      example: { url: "https://hooks.example.com/relay-events" },
      answer: answers.notificationsSet,
    },
    ({ ctx, params, body }) => notifications.setNotifications(ctx, p(params).project, body),
  ),
  route(
    "POST",
    `${base}/notifications/rotate-secret`,
    {
      operationId: "rotateNotificationSecret",
      summary: "A new notification secret, shown this once",
      access: "editor",
      answer: answers.notificationsRotated,
    },
    ({ ctx, params }) => notifications.rotateNotificationSecret(ctx, p(params).project),
  ),
  route(
    "DELETE",
    `${base}/notifications`,
    {
      operationId: "deleteNotifications",
      summary: "Stop notifications: the URL and its secret are removed",
      access: "editor",
    },
    ({ ctx, params }) => notifications.deleteNotifications(ctx, p(params).project),
  ),
]);
