/**
 * Members: the list with each token's expiry; owners add and remove members, and a member
 * rotates its own token (an owner, anyone's). A new token is on screen once. Rotating one's own
 * token keeps this browser signed in with the new one.
 */
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { type Member, MemberService, Role } from "../../../gen/relay/v1/projects_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { formatTime, roleName } from "../model.ts";
import { useInvalidate, useProject } from "../project.ts";
import { replaceToken } from "../session.ts";
import { ConfirmButton, Field, FormError, Loaded, OneTimeSecret } from "../ui.tsx";

interface Shown {
  member: Member;
  token: string;
  how: "added" | "rotated";
}

export function MembersPage() {
  const { project, token, role, memberId } = useProject();
  const members = useQuery(MemberService.method.listMembers, { project });
  const [shown, setShown] = useState<Shown | null>(null);
  const invalidate = useInvalidate(MemberService);
  const show = (how: Shown["how"]) => async (answer: { member?: Member; token: string }) => {
    if (answer.member) setShown({ member: answer.member, token: answer.token, how });
    // The old token no longer works: keep this browser signed in with the new one.
    if (answer.member?.id === memberId) replaceToken(token, answer.token);
    await invalidate();
  };
  const rotate = useMutation(MemberService.method.rotateMemberToken, {
    onSuccess: show("rotated"),
  });
  const remove = useMutation(MemberService.method.removeMember, { onSuccess: () => invalidate() });
  const failed = rotate.error ?? remove.error;
  const owner = role === "owner";

  return (
    <>
      {shown && (
        <OneTimeSecret
          secret={shown.token}
          heading={`${shown.how === "added" ? "Token of new member" : "New token of"} “${shown.member.name}”`}
          warning={
            shown.how === "rotated"
              ? "Copy this token now. It is shown only this once, and the old token no longer works."
              : "Copy this token now and hand it to the member. It is shown only this once."
          }
          testId="member-token"
          onDone={() => setShown(null)}
          doneLabel="I have copied it"
        />
      )}
      {owner && <AddMemberForm onAdded={show("added")} />}
      <FormError problem={failed ? problemOf(failed) : null} />
      <Loaded query={members} token={token}>
        {({ members }) => (
          <table>
            <caption className="visually-hidden">Members</caption>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Role</th>
                <th scope="col">Token expires</th>
                <th scope="col">Added</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {members.map((member) => {
                const own = member.id === memberId;
                return (
                  <tr key={member.id} data-member-id={member.id}>
                    <th scope="row">
                      {member.name}
                      {own && " (you)"}
                    </th>
                    <td>{roleName(member.role)}</td>
                    <td>{formatTime(member.expiresAt, "never")}</td>
                    <td>{formatTime(member.createdAt)}</td>
                    <td className="actions">
                      {(own || owner) && (
                        <ConfirmButton
                          label={`Rotate token of ${member.name}`}
                          question={`Give ${member.name} a new token? The current one stops working at once.`}
                          confirmLabel="Yes, rotate"
                          onConfirm={() => rotate.mutate({ project, memberId: member.id })}
                        />
                      )}
                      {owner && !own && (
                        <ConfirmButton
                          label={`Remove ${member.name}`}
                          question={`Remove ${member.name}? Their token stops working at once.`}
                          confirmLabel="Yes, remove"
                          onConfirm={() => remove.mutate({ project, memberId: member.id })}
                        />
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </Loaded>
    </>
  );
}

function AddMemberForm({
  onAdded,
}: {
  onAdded: (answer: { member?: Member; token: string }) => void;
}) {
  const { project } = useProject();
  const [name, setName] = useState("");
  const [role, setRole] = useState(Role.EDITOR);
  // A datetime-local value: the browser's local time, no zone.
  const [expiresAt, setExpiresAt] = useState("");
  const add = useMutation(MemberService.method.addMember, {
    onSuccess: (answer) => {
      setName("");
      setExpiresAt("");
      onAdded(answer);
    },
  });
  const problem = add.error ? problemOf(add.error) : null;
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate({
      project,
      name,
      role,
      ...(expiresAt && { expiresAt: timestampFromDate(new Date(expiresAt)) }),
    });
  };
  return (
    <form className="card" onSubmit={submit} aria-labelledby="add-member" noValidate>
      <h2 id="add-member">Add a member</h2>
      <div className="row">
        <Field label="Name" error={fieldError(problem, "name")}>
          {(control) => (
            <input
              {...control}
              name="name"
              value={name}
              onChange={(e) => setName(e.target.value)}
            />
          )}
        </Field>
        <Field label="Role" error={fieldError(problem, "role")}>
          {(control) => (
            <select
              {...control}
              name="role"
              value={role}
              onChange={(e) => setRole(Number(e.target.value))}
            >
              <option value={Role.EDITOR}>editor</option>
              <option value={Role.OWNER}>owner</option>
            </select>
          )}
        </Field>
        <Field
          label="Token expires"
          hint="Optional, at most 366 days ahead; empty: never."
          error={fieldError(problem, "expiresAt")}
        >
          {(control) => (
            <input
              {...control}
              name="expiresAt"
              type="datetime-local"
              value={expiresAt}
              onChange={(e) => setExpiresAt(e.target.value)}
            />
          )}
        </Field>
      </div>
      <FormError problem={problem} />
      <button type="submit" disabled={add.isPending}>
        Add member
      </button>
    </form>
  );
}
