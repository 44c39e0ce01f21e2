/** The key policy: owners change it; editors see it and why they cannot. */
import { useMutation, useQuery } from "@connectrpc/connect-query";
import { type FormEvent, useState } from "react";
import { type Policy, PolicyService } from "../../../gen/relay/v1/projects_pb.ts";
import { fieldError, problemOf } from "../errors.ts";
import { useInvalidate, useProject } from "../project.ts";
import { DaysField, Loaded, OwnersForm } from "../ui.tsx";

export function PolicyPage() {
  const { project, token } = useProject();
  const policy = useQuery(PolicyService.method.getPolicy, { project });
  return (
    <Loaded query={policy} token={token}>
      {({ policy }) => <PolicyForm policy={policy} />}
    </Loaded>
  );
}

const days = (value: number | undefined) => (value === undefined ? "" : String(value));

function PolicyForm({ policy }: { policy: Policy | undefined }) {
  const { project, role } = useProject();
  const readOnly = role !== "owner";
  const [defaultTtl, setDefaultTtl] = useState(days(policy?.defaultKeyTtlDays));
  const [maxTtl, setMaxTtl] = useState(days(policy?.maxKeyTtlDays));
  const [nonExpiring, setNonExpiring] = useState(policy?.editorsMayCreateNonExpiringKeys ?? true);
  const [local, setLocal] = useState<Record<string, string>>({});
  const invalidate = useInvalidate(PolicyService);
  const save = useMutation(PolicyService.method.updatePolicy, { onSuccess: () => invalidate() });
  const problem = save.error ? problemOf(save.error) : null;

  const submit = (event: FormEvent) => {
    event.preventDefault();
    const parsed: Record<string, number | undefined> = {};
    const errors: Record<string, string> = {};
    for (const [path, text] of [
      ["defaultKeyTtlDays", defaultTtl],
      ["maxKeyTtlDays", maxTtl],
    ] as const) {
      const value = text.trim() === "" ? undefined : Number(text);
      if (value !== undefined && !Number.isInteger(value))
        errors[path] = "must be a whole number of days";
      parsed[path] = value;
    }
    setLocal(errors);
    if (Object.keys(errors).length > 0) return;
    save.mutate({
      project,
      policy: {
        ...(parsed.defaultKeyTtlDays !== undefined && {
          defaultKeyTtlDays: parsed.defaultKeyTtlDays,
        }),
        ...(parsed.maxKeyTtlDays !== undefined && { maxKeyTtlDays: parsed.maxKeyTtlDays }),
        editorsMayCreateNonExpiringKeys: nonExpiring,
      },
    });
  };

  return (
    <OwnersForm
      id="policy"
      readOnly={readOnly}
      readOnlyNote="Only owners can change the key policy. You are an editor, so it is shown read-only."
      note="The policy applies to keys minted and rotated from now on."
      legend="Key lifetimes"
      onSubmit={submit}
      problem={problem}
      saved={save.isSuccess}
      saving={save.isPending}
      submitLabel="Save policy"
    >
      <DaysField
        label="Default lifetime (days)"
        hint="For a key minted without one; empty: such keys never expire."
        error={local.defaultKeyTtlDays ?? fieldError(problem, "defaultKeyTtlDays")}
        name="defaultKeyTtlDays"
        value={defaultTtl}
        onChange={setDefaultTtl}
      />
      <DaysField
        label="Longest lifetime editors may choose (days)"
        hint="Owners are not capped; empty: no cap."
        error={local.maxKeyTtlDays ?? fieldError(problem, "maxKeyTtlDays")}
        name="maxKeyTtlDays"
        value={maxTtl}
        onChange={setMaxTtl}
      />
      <div className="checkbox">
        <input
          id="non-expiring"
          type="checkbox"
          checked={nonExpiring}
          onChange={(e) => setNonExpiring(e.target.checked)}
        />
        <label htmlFor="non-expiring">Editors may create keys that never expire</label>
      </div>
    </OwnersForm>
  );
}
