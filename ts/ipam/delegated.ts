// IPAM by another plugin (host-local, static, ...): executed from CNI_PATH with the netconf as
// received, as the CNI specification prescribes for delegation.
import type { CniEnvironment, Command } from '../cni/environment.ts';
import { CniError, ErrorCode, isCniError, shorten } from '../cni/errors.ts';
import { execPlugin, findPlugin, pluginMissing } from '../cni/exec.ts';
import { formatResult, parseResult, type Result } from '../cni/result.ts';
import { compareVersions, versionAllows } from '../cni/versions.ts';
import type { ParsedNetconf } from '../config/netconf.ts';
import type { Logger } from '../log/logger.ts';
import type { Ipam } from './ipam.ts';

export class DelegatedIpam implements Ipam {
  readonly commitsCompanions = false;
  private readonly env: CniEnvironment;
  private readonly netconf: ParsedNetconf;
  private readonly log: Logger;
  private readonly type: string;
  private versions: Promise<string[]> | undefined;
  private readonly rewrite: ((command: Command) => Promise<Record<string, unknown>>) | undefined;

  /** `rewrite`: the netconf a command hands the plugin, when not the one received (host-local's pod CIDRs). */
  constructor(env: CniEnvironment, netconf: ParsedNetconf, log: Logger, rewrite?: (command: Command) => Promise<Record<string, unknown>>) {
    this.env = env;
    this.netconf = netconf;
    this.log = log;
    this.type = netconf.conf.ipam.type;
    this.rewrite = rewrite;
  }

  requirePlugin(): void {
    if (findPlugin(this.type, this.env.path) === undefined) throw pluginMissing(this.type, this.env.path);
  }

  async add(): Promise<Result> {
    const { version, output } = await this.invoke('ADD');
    if (output === undefined) throw new CniError(ErrorCode.IpamFailure, `IPAM plugin ${this.type} printed no result`);
    return parseResult(output, version, `the result of IPAM plugin ${this.type}`);
  }

  async del(interfaceGone?: Promise<unknown>): Promise<void> {
    await interfaceGone;
    await this.invoke('DEL');
  }

  async check(): Promise<void> {
    await this.invoke('CHECK');
  }

  async gc(): Promise<void> {
    if (await this.speaks11('GC')) await this.invoke('GC');
  }

  async status(): Promise<void> {
    if (!findPlugin(this.type, this.env.path)) {
      throw new CniError(ErrorCode.PluginNotAvailable, `IPAM plugin ${this.type} is not in CNI_PATH (${shorten(this.env.path.join(':'))})`);
    }
    if (await this.speaks11('STATUS')) await this.invoke('STATUS');
  }

  /** GC and STATUS exist from CNI 1.1.0 on; an older plugin has nothing to forward them to. */
  private async speaks11(command: 'GC' | 'STATUS'): Promise<boolean> {
    const versions = await this.supportedVersions();
    const speaks = versions.some((v) => versionAllows(v, command));
    if (!speaks) this.log.debug(`not forwarding ${command}: IPAM plugin ${this.type} speaks CNI ${versions.join(', ')} only`);
    return speaks;
  }

  /**
   * Runs the plugin with the netconf's version; if it answers that it does not speak that
   * version (error 1), again with the newest older version it does speak, so that a 1.1.0
   * network can still use a 1.0.0 IPAM plugin.
   */
  private async invoke(command: Command): Promise<{ version: string; output: unknown }> {
    const version = this.netconf.conf.cniVersion;
    const json = this.rewrite ? await this.rewrite(command) : this.netconf.json;
    try {
      return { version, output: await this.exec(command, this.rewrite ? Buffer.from(JSON.stringify(json)) : this.netconf.raw) };
    } catch (err) {
      if (!isCniError(err) || err.code !== ErrorCode.IncompatibleVersion) throw err;
      const older = (await this.supportedVersions())
        .filter((v) => compareVersions(v, version) < 0)
        .sort(compareVersions)
        .at(-1);
      if (!older) throw err;
      this.log.info(`IPAM plugin ${this.type} does not speak CNI ${version}; using ${older}`);
      return { version: older, output: await this.exec(command, this.stdinFor(json, older)) };
    }
  }

  private exec(command: Command, stdin: Buffer): Promise<unknown> {
    return execPlugin({ type: this.type, command, path: this.env.path, env: this.env.raw, stdin, log: this.log });
  }

  private supportedVersions(): Promise<string[]> {
    this.versions ??= this.exec('VERSION', Buffer.from(JSON.stringify({ cniVersion: this.netconf.conf.cniVersion }))).then((answer) => {
      const versions = (answer as { supportedVersions?: unknown } | undefined)?.supportedVersions;
      return Array.isArray(versions) ? versions.filter((v): v is string => typeof v === 'string') : [];
    });
    return this.versions;
  }

  /** The netconf in an older version: cniVersion, and any prevResult, rewritten. */
  private stdinFor(netconf: Record<string, unknown>, version: string): Buffer {
    const json: Record<string, unknown> = { ...netconf, cniVersion: version };
    if (json['prevResult'] !== undefined) {
      const prev = parseResult(json['prevResult'], this.netconf.conf.cniVersion, 'prevResult');
      json['prevResult'] = formatResult(prev, version);
    }
    return Buffer.from(JSON.stringify(json));
  }
}
