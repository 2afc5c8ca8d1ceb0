// Entry point of the bundle and of the single executable built from it.
import { main } from './main.ts';

main();
