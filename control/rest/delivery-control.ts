/**
 * The Delivery control routes (circuits and pauses): each REST contract beside the operation it
 * calls, as control/connect/delivery-control.ts serves the same operations over Connect.
 */
import * as answers from "../api/answers.ts";
import * as circuits from "../api/circuits.ts";
import { endpointPath, endpointRef, p, type Route, route, tagged } from "./contract.ts";

const targetPath = `${endpointPath}/targets/:target`;

export const deliveryControlRoutes: Route[] = tagged("Delivery control", [
  route(
    "GET",
    `${endpointPath}/circuits`,
    {
      operationId: "getCircuits",
      summary: "Each target's circuit: state, pauses, waiting deliveries, recent events",
      access: "editor",
      answer: answers.circuits,
    },
    ({ ctx, params }) => circuits.getCircuits(ctx, p(params).project, endpointRef(params)),
  ),
  ...([true, false] as const).flatMap((paused) => {
    const [action, Action] = paused ? ["pause", "Pause"] : ["resume", "Resume"];
    return [
      route(
        "POST",
        `${endpointPath}/${action}`,
        {
          operationId: `${action}Endpoint`,
          summary: `${Action} every target of an endpoint`,
          access: "editor",
          answer: answers.circuits,
          status: 200,
        },
        ({ ctx, params }) =>
          circuits.pauseEndpoint(ctx, p(params).project, endpointRef(params), paused),
      ),
      route(
        "POST",
        `${targetPath}/${action}`,
        {
          operationId: `${action}Target`,
          summary: `${Action} one target`,
          access: "editor",
          answer: answers.circuits,
          status: 200,
        },
        ({ ctx, params }) =>
          circuits.pauseTarget(
            ctx,
            p(params).project,
            endpointRef(params),
            p(params).target,
            paused,
          ),
      ),
    ];
  }),
  route(
    "POST",
    `${targetPath}/enable`,
    {
      operationId: "enableTarget",
      summary: "Enable a target its circuit disabled",
      access: "editor",
      answer: answers.circuits,
      status: 200,
    },
    ({ ctx, params }) =>
      circuits.enableTarget(ctx, p(params).project, endpointRef(params), p(params).target),
  ),
]);
