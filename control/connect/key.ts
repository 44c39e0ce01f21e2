import type { ConnectRouter } from "@connectrpc/connect";
import { keyModes } from "../../core/model.ts";
import { KeyService } from "../../gen/relay/v1/keys_pb.ts";
import * as keys from "../api/keys.ts";
import type { ContextOf } from "./caller.ts";
import { fromEnum, keyOut } from "./convert.ts";

export function keyService(router: ConnectRouter, ctxOf: ContextOf): void {
  router.service(KeyService, {
    async listKeys(req, h) {
      return { keys: (await keys.listKeys(ctxOf(h), req.project)).map(keyOut) };
    },
    async mintKey(req, h) {
      const issued = await keys.mintKey(ctxOf(h), req.project, {
        name: req.name,
        mode: fromEnum(keyModes, req.mode),
        ttlDays: req.ttlDays,
      });
      return { key: keyOut(issued.key), plaintext: issued.plaintext };
    },
    async rotateKey(req, h) {
      const issued = await keys.rotateKey(ctxOf(h), req.project, req.keyId);
      return { key: keyOut(issued.key), plaintext: issued.plaintext };
    },
    async revokeKey(req, h) {
      return { key: keyOut(await keys.revokeKey(ctxOf(h), req.project, req.keyId)) };
    },
    async revealSuccessor(req, h) {
      const issued = await keys.revealSuccessor(ctxOf(h), req.project, req.keyId);
      return { key: keyOut(issued.key), plaintext: issued.plaintext };
    },
  });
}
