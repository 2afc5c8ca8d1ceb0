// The specification's spellings of two fields, accepted beside the real layout:
// spec.calicoNetwork.cni.type for spec.cni.type, and spec.calicoNetwork.cni.ipam.type and
// spec.cni.ipam.plugin (the spec's Spec.CNI.IPAM.Plugin) for spec.cni.ipam.type. The result has
// the value in the real field only; forms that disagree are refused, naming both.
import { type InstallationSpec, InvalidConfiguration } from './installation.ts';

type Form = { field: string; value: string | undefined };

/** The one value the forms give (undefined if none does); InvalidConfiguration if two disagree. */
function agreed(forms: Form[]): string | undefined {
  const given = forms.filter((form): form is { field: string; value: string } => form.value !== undefined);
  const [first] = given;
  const other = given.find((form) => form.value !== first?.value);
  if (first && other)
    throw new InvalidConfiguration(
      `${first.field} "${first.value}" and ${other.field} "${other.value}" disagree: they are two forms of one setting; give one, or the same value in both`,
    );
  return first?.value;
}

export function normaliseAliases(spec: InstallationSpec): InstallationSpec {
  const cniType = agreed([
    { field: 'spec.cni.type', value: spec.cni?.type },
    { field: 'spec.calicoNetwork.cni.type', value: spec.calicoNetwork?.cni?.type },
  ]);
  const ipamType = agreed([
    { field: 'spec.cni.ipam.type', value: spec.cni?.ipam?.type },
    { field: 'spec.cni.ipam.plugin', value: spec.cni?.ipam?.plugin },
    { field: 'spec.calicoNetwork.cni.ipam.type', value: spec.calicoNetwork?.cni?.ipam?.type },
  ]);
  const copy = structuredClone(spec);
  if (copy.calicoNetwork) delete copy.calicoNetwork.cni;
  if (copy.cni?.ipam) delete copy.cni.ipam.plugin;
  if (cniType !== undefined) copy.cni = { ...copy.cni, type: cniType };
  if (ipamType !== undefined) copy.cni = { ...copy.cni, ipam: { ...copy.cni?.ipam, type: ipamType } };
  return copy;
}
